//! Deletion vectors as Iceberg delete files: position-delete Parquet (v2) or Puffin
//! deletion vectors (v3), under the metadata folder.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion,
};
use roaring::RoaringTreemap;

use lakemirror_delta::deletion_vector::{DeletionVector, read_positions};
use lakemirror_plan::PlannedFile;
use lakemirror_plan::properties::*;

use crate::error::{Error, Result};
use crate::puffin::deletion_vector_file;

use super::*;

/// Memory one deleted row takes while its position-delete file is written (its position, and
/// its share of the file path column and the Parquet output).
const BYTES_PER_DELETED_ROW: u64 = 24;

impl MetadataWriter {
    /// Writes the rows `file`'s deletion vector deletes as an Iceberg delete file, under the
    /// metadata folder (which Delta VACUUM leaves alone): a position-delete Parquet file in
    /// format v2, a Puffin deletion vector in v3. None for an empty vector.
    pub(super) async fn write_deletes(
        &self,
        file: &PlannedFile,
        dv: &DeletionVector,
        spec_id: i32,
        format_version: FormatVersion,
    ) -> Result<Option<DataFile>> {
        let positions = read_positions(&self.data_store, &file.location, dv).await?;
        let count = positions.len();
        if i64::try_from(count).ok() != Some(dv.cardinality) {
            return Err(Error::malformed(
                self.data_store.root_uri(),
                format!(
                    "the deletion vector of {} holds {count} rows, the log says {}",
                    file.location, dv.cardinality
                ),
            ));
        }
        if let Some(rows) = file.record_count
            && count > rows
        {
            return Err(Error::malformed(
                self.data_store.root_uri(),
                format!(
                    "the deletion vector of {} deletes {count} rows of a file of {rows}",
                    file.location
                ),
            ));
        }
        if count == 0 {
            return Ok(None);
        }
        if format_version == FormatVersion::V3 {
            return self
                .write_deletion_vector(file, &positions, spec_id)
                .await
                .map(Some);
        }
        // The positions as a position-delete file take about this much while it is written.
        let _room = lakemirror_storage::budget::current()
            .reserve(&file.location, count.saturating_mul(BYTES_PER_DELETED_ROW))
            .await?;
        let bytes = position_delete_parquet(&file.location, &positions)?;
        let location = self
            .metadata_store
            .location(&format!("deletes/{}.parquet", uuid::Uuid::new_v4()));
        let size = bytes.len() as u64;
        self.metadata_store.put(&location, bytes.into()).await?;
        // Equal file_path bounds tell readers the one data file these deletes apply to.
        let bound = Datum::string(&file.location);
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(location.clone())
            .file_format(DataFileFormat::Parquet)
            .partition(file.partition.clone())
            .partition_spec_id(spec_id)
            .record_count(count)
            .file_size_in_bytes(size)
            .lower_bounds(HashMap::from([(DELETE_FILE_PATH_ID, bound.clone())]))
            .upper_bounds(HashMap::from([(DELETE_FILE_PATH_ID, bound)]))
            .referenced_data_file(Some(file.location.clone()))
            .build()
            .map(Some)
            .map_err(|e| Error::data_file(location, e))
    }

    /// A v3 deletion vector: one Puffin file per data file.
    pub(super) async fn write_deletion_vector(
        &self,
        file: &PlannedFile,
        positions: &RoaringTreemap,
        spec_id: i32,
    ) -> Result<DataFile> {
        let puffin = deletion_vector_file(&file.location, positions).await?;
        let location = self
            .metadata_store
            .location(&format!("deletes/{}.puffin", uuid::Uuid::new_v4()));
        let size = puffin.bytes.len() as u64;
        self.metadata_store
            .put(&location, puffin.bytes.into())
            .await?;
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(location.clone())
            .file_format(DataFileFormat::Puffin)
            .partition(file.partition.clone())
            .partition_spec_id(spec_id)
            .record_count(positions.len())
            .file_size_in_bytes(size)
            .referenced_data_file(Some(file.location.clone()))
            .content_offset(Some(puffin.content_offset))
            .content_size_in_bytes(Some(puffin.content_size_in_bytes))
            .build()
            .map_err(|e| Error::data_file(location, e))
    }
}

/// A position-delete Parquet file: `file_path`, `pos` (ascending), with Iceberg's reserved
/// field IDs.
pub(super) fn position_delete_parquet(
    data_location: &str,
    positions: &RoaringTreemap,
) -> Result<Vec<u8>> {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema as ArrowSchema};

    let field = |name: &str, ty: DataType, id: i32| {
        Field::new(name, ty, false).with_metadata(HashMap::from([(
            parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    };
    let schema = Arc::new(ArrowSchema::new(vec![
        field("file_path", DataType::Utf8, DELETE_FILE_PATH_ID),
        field("pos", DataType::Int64, DELETE_POS_ID),
    ]));
    let positions: Vec<i64> = positions
        .iter()
        .map(|p| {
            i64::try_from(p).map_err(|_| {
                Error::data_file(
                    data_location,
                    format!("its deletion vector deletes row {p}, past what Iceberg can name"),
                )
            })
        })
        .collect::<Result<_>>()?;
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, schema.clone(), None)?;
    for chunk in positions.chunks(1 << 16) {
        let paths: ArrayRef = Arc::new(StringArray::from(vec![data_location; chunk.len()]));
        let pos: ArrayRef = Arc::new(Int64Array::from(chunk.to_vec()));
        let batch = RecordBatch::try_new(schema.clone(), vec![paths, pos])?;
        writer.write(&batch)?;
    }
    writer.close()?;
    Ok(out)
}
