//! An Iceberg table as last committed, and the planner's view of it.

use std::collections::HashMap;

use iceberg::spec::TableMetadata;

use crate::error::{Error, Result};
use crate::partition::{PARTITION_TIMEZONE_PROPERTY, PartitionZone};
use crate::properties::{
    CATALOG_TABLE_ID_PROPERTY, CATALOG_TABLE_NAME_PROPERTY, COLUMN_MAPPED_PROPERTY,
    DELTA_COMMIT_HASH, DELTA_TABLE_ID_PROPERTY, DELTA_VERSION, OMITTED_COLUMNS_PROPERTY,
    OmittedDeclaration, PHYSICAL_NAMES_PROPERTY, ROW_LINEAGE_PROPERTY,
    SPARK_VECTORIZATION_PROPERTY, WIDENED_TO_LONG_PROPERTY, omitted_declarations,
};
use crate::snapshot::IcebergView;

/// An Iceberg table as last committed.
#[derive(Debug, Clone)]
pub struct CommittedTable {
    pub metadata: TableMetadata,
    pub metadata_location: String,
}

impl CommittedTable {
    /// The planner's view of this table.
    pub fn view(&self) -> Result<IcebergView> {
        let m = &self.metadata;
        let schema = m.current_schema();
        let spec = m.default_partition_spec();
        let partition_columns: Vec<String> = spec
            .fields()
            .iter()
            .map(|f| {
                schema
                    .name_by_field_id(f.source_id)
                    .map(str::to_string)
                    .ok_or_else(|| {
                        Error::MirrorMetadata(format!(
                            "partition field {} has no source column",
                            f.name
                        ))
                    })
            })
            .collect::<Result<_>>()?;
        let mapping: Option<iceberg::spec::NameMapping> = m
            .properties()
            .get(iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING)
            .and_then(|json| serde_json::from_str(json).ok());
        let physical_names = match m.properties().get(PHYSICAL_NAMES_PROPERTY) {
            Some(json) => serde_json::from_str::<HashMap<i32, String>>(json).map_err(|e| {
                Error::MirrorMetadata(format!(
                    "the mirror's {PHYSICAL_NAMES_PROPERTY} property is not a JSON object of field IDs to names ({e}); delete the Glue table and sync again to rebuild it"
                ))
            })?,
            // Mirrors written before the property: the last name the name mapping gives a
            // column-mapped field is its physical name.
            None => {
                let mut names = HashMap::new();
                if let Some(mapping) = &mapping
                    && m.properties().contains_key(COLUMN_MAPPED_PROPERTY)
                {
                    collect_physical_names(mapping.fields(), &mut names);
                }
                names
            }
        };
        // partitionValues keys: with column mapping, the physical names.
        let partition_keys = spec
            .fields()
            .iter()
            .zip(&partition_columns)
            .map(|(f, column)| {
                physical_names
                    .get(&f.source_id)
                    .cloned()
                    .unwrap_or_else(|| column.clone())
            })
            .collect();
        let omitted_columns = self.omitted_declarations();
        let widened_to_long = self.widened_to_long();
        let partition_zone = m
            .properties()
            .get(PARTITION_TIMEZONE_PROPERTY)
            .and_then(|zone| PartitionZone::parse(zone).ok());
        Ok(IcebergView {
            physical_names,
            schema: schema.as_ref().clone(),
            last_column_id: m.last_column_id(),
            next_schema_id: m.schemas_iter().map(|s| s.schema_id()).max().unwrap_or(0) + 1,
            partition_columns,
            partition_keys,
            delta_version: self.delta_version(),
            column_mapped: m.properties().contains_key(COLUMN_MAPPED_PROPERTY),
            name_mapping: mapping,
            omitted_columns,
            widened_to_long,
            partition_zone,
            format_version: m.format_version(),
            row_lineage: m.properties().contains_key(ROW_LINEAGE_PROPERTY),
        })
    }

    /// The hash of the Delta commit the current snapshot mirrors, when recorded.
    pub fn commit_hash(&self) -> Option<u64> {
        let hex = self
            .metadata
            .current_snapshot()?
            .summary()
            .additional_properties
            .get(DELTA_COMMIT_HASH)?;
        u64::from_str_radix(hex, 16).ok()
    }

    /// The `metaData.id` of the Delta table mirrored, when recorded.
    pub fn delta_table_id(&self) -> Option<&str> {
        self.metadata
            .properties()
            .get(DELTA_TABLE_ID_PROPERTY)
            .map(String::as_str)
    }

    /// The catalog's id of the Delta table mirrored, when it is catalog-managed.
    pub fn catalog_table_id(&self) -> Option<&str> {
        self.metadata
            .properties()
            .get(CATALOG_TABLE_ID_PROPERTY)
            .map(String::as_str)
    }

    /// The catalog's name of the Delta table mirrored, as its catalog last gave it.
    pub fn catalog_table_name(&self) -> Option<&str> {
        self.metadata
            .properties()
            .get(CATALOG_TABLE_NAME_PROPERTY)
            .map(String::as_str)
    }

    /// The columns widened from a smaller integer to long whose older files Spark's
    /// vectorized reader cannot read (`lakemirror.widened-to-long`).
    pub fn widened_to_long(&self) -> Vec<String> {
        self.metadata
            .properties()
            .get(WIDENED_TO_LONG_PROPERTY)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default()
    }

    /// What readers are told about this mirror, beside its columns: why Spark reads it row
    /// by row, when it does.
    pub fn reader_notes(&self) -> Vec<String> {
        let widened = self.widened_to_long();
        if widened.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "{SPARK_VECTORIZATION_PROPERTY}=false: {} widened to long, and files written before hold a narrower integer, which the vectorized Parquet reader of Iceberg 1.10 (Spark, EMR, Glue ETL) cannot read (apache/iceberg#16341); Spark reads this table row by row until Delta no longer lists the change (delta.typeChanges)",
            widened.join(", ")
        )]
    }

    /// The columns the mirror leaves out, by logical path.
    pub fn omitted_columns(&self) -> Vec<String> {
        self.omitted_declarations()
            .into_iter()
            .map(|c| c.column)
            .collect()
    }

    /// The columns the mirror leaves out, with why.
    pub fn omitted_declarations(&self) -> Vec<OmittedDeclaration> {
        self.metadata
            .properties()
            .get(OMITTED_COLUMNS_PROPERTY)
            .map(|json| omitted_declarations(json))
            .unwrap_or_default()
    }

    /// The Delta version of the current snapshot.
    pub fn delta_version(&self) -> Option<i64> {
        self.metadata
            .current_snapshot()?
            .summary()
            .additional_properties
            .get(DELTA_VERSION)?
            .parse()
            .ok()
    }
}

/// Field ID -> the last name the name mapping gives it: the physical name, in the mappings
/// of column-mapped tables that lakemirror wrote before [`PHYSICAL_NAMES_PROPERTY`].
fn collect_physical_names(
    fields: &[impl std::borrow::Borrow<iceberg::spec::MappedField>],
    out: &mut HashMap<i32, String>,
) {
    for field in fields {
        let field = field.borrow();
        if let (Some(id), Some(name)) = (field.field_id(), field.names().last()) {
            out.insert(id, name.clone());
        }
        collect_physical_names(field.fields(), out);
    }
}
