//! The table's definition as a plan states it: its schema, and the properties that say how
//! data files name columns.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;

use lakemirror_plan::SnapshotPlan;
use lakemirror_plan::metrics::set_metrics_modes;
use lakemirror_plan::name_mapping::with_variant_fields_of;
use lakemirror_plan::partition::PARTITION_TIMEZONE_PROPERTY;
use lakemirror_plan::properties::*;

use crate::error::Result;
use crate::writer::*;

use super::TableState;

impl TableState {
    /// The table's properties and schema as `plan` states them.
    pub(super) async fn take_definition(
        &mut self,
        writer: &MetadataWriter,
        plan: &mut SnapshotPlan,
    ) -> Result<()> {
        writer.complete_record_counts(&mut plan.added).await?;
        if let Some(retention) = plan.deleted_file_retention_ms {
            self.properties
                .insert(RETENTION_PROPERTY.to_string(), retention.to_string());
        }
        let key = iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING;
        let earlier = match plan.name_mapping {
            Some(_) => self.properties.get(key).cloned(),
            None => None,
        };
        set_definition_properties(&mut self.properties, plan)?;
        // A new mapping (a schema change) is planned from the mapping as the sync found it:
        // it keeps the fields of left-out variants this sync's earlier snapshots mapped.
        if let Some(earlier) = earlier.and_then(|json| serde_json::from_str(&json).ok())
            && let Some(current) = self
                .properties
                .get(key)
                .and_then(|json| serde_json::from_str(json).ok())
            && let Some(kept) = with_variant_fields_of(&current, &earlier)
        {
            self.properties
                .insert(key.to_string(), serde_json::to_string(&kept)?);
        }
        if self.format_version < iceberg::spec::FormatVersion::V3 {
            writer
                .map_left_out_variants(&mut self.properties, &plan.added)
                .await?;
        }
        self.properties
            .insert(GC_ENABLED.to_string(), "false".to_string());
        if let Some(schema) = plan.schema.take() {
            // The builder gives a schema equal to an earlier one that one's ID (a column
            // added and dropped again): snapshots and manifests must name the same ID.
            let schema_id = self
                .schemas
                .iter()
                .find(|known| {
                    known.as_struct() == schema.as_struct()
                        && known
                            .identifier_field_ids()
                            .eq(schema.identifier_field_ids())
                })
                .map_or_else(
                    || {
                        self.schemas
                            .iter()
                            .map(|s| s.schema_id())
                            .max()
                            .unwrap_or(-1)
                            + 1
                    },
                    |known| known.schema_id(),
                );
            let schema = Arc::new(schema.into_builder().with_schema_id(schema_id).build()?);
            set_metrics_modes(&schema, &mut self.properties);
            self.builder = Some(
                self.take_builder()?
                    .add_current_schema(schema.as_ref().clone())?,
            );
            if !self.schemas.iter().any(|s| s.schema_id() == schema_id) {
                self.schemas.push(schema.clone());
            }
            self.schema = schema;
        }
        Ok(())
    }
}

/// The table properties that describe how data files name columns, from a plan that
/// changes them: the name mapping, the physical names of column-mapped fields, and the
/// columns left out for Java's sake.
pub(super) fn set_definition_properties(
    properties: &mut HashMap<String, String>,
    plan: &mut SnapshotPlan,
) -> Result<()> {
    if let Some(id) = plan.delta_table_id.take() {
        properties.insert(DELTA_TABLE_ID_PROPERTY.to_string(), id);
    }
    match plan.row_lineage {
        Some(_) => {
            properties.insert(ROW_LINEAGE_PROPERTY.to_string(), "true".to_string());
        }
        None => {
            properties.remove(ROW_LINEAGE_PROPERTY);
        }
    }
    match plan.catalog_table_id.take() {
        Some(Some(id)) => {
            properties.insert(CATALOG_TABLE_ID_PROPERTY.to_string(), id);
            // The name the catalog answered by this time; none (its preview route answers by
            // id, or no catalog was asked) leaves nothing stale to ask by.
            match plan.catalog_table_name.take() {
                Some(name) => properties.insert(CATALOG_TABLE_NAME_PROPERTY.to_string(), name),
                None => properties.remove(CATALOG_TABLE_NAME_PROPERTY),
            };
        }
        Some(None) => {
            properties.remove(CATALOG_TABLE_ID_PROPERTY);
            properties.remove(CATALOG_TABLE_NAME_PROPERTY);
        }
        None => {}
    }
    if let Some(mapping) = plan.name_mapping.take() {
        properties.insert(
            iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING.to_string(),
            serde_json::to_string(&mapping)?,
        );
    }
    if !plan.physical_names.is_empty() {
        let sorted: BTreeMap<&i32, &String> = plan.physical_names.iter().collect();
        properties.insert(COLUMN_MAPPED_PROPERTY.to_string(), "true".to_string());
        properties.insert(
            PHYSICAL_NAMES_PROPERTY.to_string(),
            serde_json::to_string(&sorted)?,
        );
    }
    match plan.partition_zone.take() {
        Some(Some(zone)) => {
            properties.insert(PARTITION_TIMEZONE_PROPERTY.to_string(), zone);
        }
        Some(None) => {
            properties.remove(PARTITION_TIMEZONE_PROPERTY);
        }
        None => {}
    }
    if let Some(history) = plan.history.take() {
        for (key, value) in history.properties() {
            match value {
                Some(value) => properties.insert(key.to_string(), value.to_string()),
                None => properties.remove(key),
            };
        }
    }
    if !plan.v3_types.is_empty() {
        // Field IDs are never reused: every schema of the table reads its types from here.
        let mut types: BTreeMap<i32, String> = properties
            .get(V3_TYPES_PROPERTY)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        types.extend(std::mem::take(&mut plan.v3_types));
        properties.insert(
            V3_TYPES_PROPERTY.to_string(),
            serde_json::to_string(&types)?,
        );
    }
    match plan.widened_to_long.take() {
        Some(widened) if widened.is_empty() => {
            properties.remove(WIDENED_TO_LONG_PROPERTY);
            properties.remove(SPARK_VECTORIZATION_PROPERTY);
        }
        Some(widened) => {
            properties.insert(
                WIDENED_TO_LONG_PROPERTY.to_string(),
                serde_json::to_string(&widened)?,
            );
            properties.insert(SPARK_VECTORIZATION_PROPERTY.to_string(), "false".into());
        }
        None => {}
    }
    match plan.omitted_columns.take() {
        Some(omitted) if omitted.is_empty() => {
            properties.remove(OMITTED_COLUMNS_PROPERTY);
        }
        Some(omitted) => {
            properties.insert(
                OMITTED_COLUMNS_PROPERTY.to_string(),
                serde_json::to_string(&omitted)?,
            );
        }
        None => {}
    }
    Ok(())
}
