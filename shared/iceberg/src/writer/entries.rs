//! A manifest's entries encoded to Avro directly, in the layout of iceberg-rust's own
//! manifest schema (v2, which v3 keeps).
//!
//! iceberg-rust 0.10's `ManifestWriter` turns each entry into an `apache_avro::Value`,
//! resolves it against the schema (building the resolved schema again for every entry),
//! validates it and encodes it: 46% of the CPU of a 1,000,000-file bootstrap
//! (docs/performance.md). Here iceberg still writes the file's header (its schema, the
//! table's schema and spec, the sync marker) as an empty manifest, and the manifest's
//! descriptor; the entries are encoded from the `DataFile`s and appended as blocks after
//! it. A partition field whose Avro form is a `fixed` (decimal, uuid, fixed) is left to
//! iceberg's writer ([`EntryEncoder::for_partition`] answers None). The tests write the same
//! entries both ways and compare what iceberg reads back.

use bytes::{BufMut, Bytes, BytesMut};
use iceberg::spec::{
    DataContentType, DataFile, Datum, FieldSummary, Literal, ManifestFile, PrimitiveLiteral,
    PrimitiveType, StructType, Type,
};

use lakemirror_plan::layout::Content;

use crate::error::{Error, Result};

/// Entries of one block: readers hold a block at once.
const BLOCK_BYTES: usize = 1 << 20;

/// The entries of one manifest, encoded as they are added.
pub(super) struct EntryEncoder {
    content: Content,
    partition: Vec<PrimitiveType>,
    /// Encoded entries not yet in a block, and the blocks written.
    pending: Vec<u8>,
    pending_count: i64,
    blocks: Vec<(i64, Vec<u8>)>,
    counts: Counts,
    min_sequence_number: Option<i64>,
    bounds: Vec<FieldBounds>,
}

#[derive(Default)]
struct Counts {
    added_files: u32,
    added_rows: u64,
    existing_files: u32,
    existing_rows: u64,
    deleted_files: u32,
    deleted_rows: u64,
}

/// A partition field's summary over the manifest's entries, as iceberg computes it.
struct FieldBounds {
    contains_null: bool,
    contains_nan: bool,
    lower: Option<PrimitiveLiteral>,
    upper: Option<PrimitiveLiteral>,
}

/// Entry status in a manifest (Iceberg spec).
#[derive(Clone, Copy)]
enum Status {
    Existing = 0,
    Added = 1,
    Deleted = 2,
}

impl EntryEncoder {
    /// An encoder for manifests of `partition_type`; None when a field's type is one this
    /// module does not encode (its Avro form is a `fixed`), for iceberg's writer to write.
    pub(super) fn for_partition(content: Content, partition_type: &StructType) -> Option<Self> {
        let partition = partition_type
            .fields()
            .iter()
            .map(|field| match field.field_type.as_ref() {
                Type::Primitive(p) if encoded(p) => Some(p.clone()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        let bounds = partition
            .iter()
            .map(|_| FieldBounds {
                contains_null: false,
                contains_nan: false,
                lower: None,
                upper: None,
            })
            .collect();
        Some(Self {
            content,
            partition,
            pending: Vec::with_capacity(BLOCK_BYTES),
            pending_count: 0,
            blocks: Vec::new(),
            counts: Counts::default(),
            min_sequence_number: None,
            bounds,
        })
    }

    /// A file the snapshot keeps: its snapshot and sequence numbers as first committed.
    pub(super) fn existing(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> Result<()> {
        let file_sequence_number = file_sequence_number.ok_or_else(|| missing(file))?;
        self.counts.existing_files += 1;
        self.counts.existing_rows += file.record_count();
        self.alive(sequence_number);
        self.entry(
            Status::Existing,
            file,
            Some(snapshot_id),
            Some(sequence_number),
            Some(file_sequence_number),
        )
    }

    /// A file the snapshot `snapshot_id` deletes, with the sequence numbers it had.
    pub(super) fn deleted(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> Result<()> {
        let file_sequence_number = file_sequence_number.ok_or_else(|| missing(file))?;
        self.counts.deleted_files += 1;
        self.counts.deleted_rows += file.record_count();
        self.entry(
            Status::Deleted,
            file,
            Some(snapshot_id),
            Some(sequence_number),
            Some(file_sequence_number),
        )
    }

    /// A file the snapshot `snapshot_id` adds; its file sequence number is assigned at commit.
    pub(super) fn added(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence_number: i64,
    ) -> Result<()> {
        let sequence_number = (sequence_number >= 0).then_some(sequence_number);
        self.counts.added_files += 1;
        self.counts.added_rows += file.record_count();
        if let Some(n) = sequence_number {
            self.alive(n);
        }
        self.entry(
            Status::Added,
            file,
            Some(snapshot_id),
            sequence_number,
            None,
        )
    }

    fn alive(&mut self, sequence_number: i64) {
        self.min_sequence_number = Some(
            self.min_sequence_number
                .map_or(sequence_number, |n| n.min(sequence_number)),
        );
    }

    fn entry(
        &mut self,
        status: Status,
        file: &DataFile,
        snapshot_id: Option<i64>,
        sequence_number: Option<i64>,
        file_sequence_number: Option<i64>,
    ) -> Result<()> {
        let fits = match self.content {
            Content::Data => file.content_type() == DataContentType::Data,
            Content::Deletes => file.content_type() != DataContentType::Data,
        };
        if !fits {
            return Err(Error::Bug(format!(
                "{}: a {:?} file in a manifest of {:?}",
                file.file_path(),
                file.content_type(),
                self.content
            )));
        }
        self.partition_of(file)?;
        let out = &mut self.pending;
        put_int(out, status as i32);
        put_optional(out, snapshot_id, put_long);
        put_optional(out, sequence_number, put_long);
        put_optional(out, file_sequence_number, put_long);
        // data_file, in the order of iceberg's data_file_fields_v2.
        put_int(out, file.content_type() as i32);
        put_bytes(out, file.file_path().as_bytes());
        put_bytes(
            out,
            file.file_format()
                .to_string()
                .to_ascii_uppercase()
                .as_bytes(),
        );
        for (literal, field_type) in file.partition().iter().zip(&self.partition) {
            match literal {
                None => put_long(out, 0),
                Some(literal) => {
                    put_long(out, 1);
                    put_primitive(out, field_type, literal, file.file_path())?;
                }
            }
        }
        put_long(out, long(file.record_count(), file)?);
        put_long(out, long(file.file_size_in_bytes(), file)?);
        for counts in [
            file.column_sizes(),
            file.value_counts(),
            file.null_value_counts(),
            file.nan_value_counts(),
        ] {
            put_long(out, 1);
            put_array(out, counts.iter(), |out, (key, value)| {
                put_int(out, *key);
                put_long(out, long(*value, file)?);
                Ok(())
            })?;
        }
        for bounds in [file.lower_bounds(), file.upper_bounds()] {
            put_long(out, 1);
            put_array(out, bounds.iter(), |out, (key, value)| {
                put_int(out, *key);
                let bytes = value
                    .to_bytes()
                    .map_err(|e| Error::data_file(file.file_path(), e))?;
                put_bytes(out, &bytes);
                Ok(())
            })?;
        }
        put_optional(out, file.key_metadata(), put_bytes);
        match file.split_offsets() {
            None => put_long(out, 0),
            Some(offsets) => {
                put_long(out, 1);
                put_array(out, offsets.iter(), |out, offset| {
                    put_long(out, *offset);
                    Ok(())
                })?;
            }
        }
        match file.equality_ids() {
            None => put_long(out, 0),
            Some(ids) => {
                put_long(out, 1);
                put_array(out, ids.iter(), |out, id| {
                    put_int(out, *id);
                    Ok(())
                })?;
            }
        }
        put_optional(out, file.sort_order_id(), put_int);
        put_optional(out, file.first_row_id(), put_long);
        put_optional(
            out,
            file.referenced_data_file().as_deref().map(str::as_bytes),
            put_bytes,
        );
        put_optional(out, file.content_offset(), put_long);
        put_optional(out, file.content_size_in_bytes(), put_long);
        self.pending_count += 1;
        if self.pending.len() >= BLOCK_BYTES {
            self.end_block();
        }
        Ok(())
    }

    /// Folds the file's partition into the manifest's partition summary.
    fn partition_of(&mut self, file: &DataFile) -> Result<()> {
        let partition = file.partition();
        if partition.fields().len() != self.partition.len() {
            return Err(Error::data_file(
                file.file_path(),
                format!(
                    "a partition of {} values for a spec of {} fields",
                    partition.fields().len(),
                    self.partition.len()
                ),
            ));
        }
        for (literal, bounds) in partition.iter().zip(&mut self.bounds) {
            let Some(literal) = literal else {
                bounds.contains_null = true;
                continue;
            };
            let value = primitive(literal, file.file_path())?;
            if value.is_nan() {
                bounds.contains_nan = true;
                continue;
            }
            if bounds.lower.as_ref().is_none_or(|lower| value < lower) {
                bounds.lower = Some(value.clone());
            }
            if bounds.upper.as_ref().is_none_or(|upper| value > upper) {
                bounds.upper = Some(value.clone());
            }
        }
        Ok(())
    }

    fn end_block(&mut self) {
        if self.pending_count > 0 {
            let block = std::mem::replace(&mut self.pending, Vec::with_capacity(BLOCK_BYTES));
            self.blocks.push((self.pending_count, block));
            self.pending_count = 0;
        }
    }

    /// The manifest: `empty`, the file iceberg's writer wrote for the same manifest without
    /// entries (its header ends with the sync marker), with the entries' blocks after it; and
    /// `descriptor`, what that writer answered, with the entries' counts and summaries.
    pub(super) fn finish(
        mut self,
        empty: Bytes,
        mut descriptor: ManifestFile,
    ) -> Result<(Bytes, ManifestFile)> {
        self.end_block();
        let sync = empty
            .len()
            .checked_sub(16)
            .filter(|_| empty.starts_with(crate::avro_header::MAGIC))
            .map(|at| empty.slice(at..))
            .ok_or_else(|| Error::Bug("iceberg wrote an empty manifest without a header".into()))?;
        let size = empty.len() + self.blocks.iter().map(|(_, b)| b.len() + 36).sum::<usize>();
        let mut file = BytesMut::with_capacity(size);
        file.put_slice(&empty);
        for (count, block) in &self.blocks {
            let mut head = Vec::with_capacity(20);
            put_long(&mut head, *count);
            put_long(&mut head, block.len() as i64);
            file.put_slice(&head);
            file.put_slice(block);
            file.put_slice(&sync);
        }
        let Counts {
            added_files,
            added_rows,
            existing_files,
            existing_rows,
            deleted_files,
            deleted_rows,
        } = self.counts;
        descriptor.manifest_length = file.len() as i64;
        descriptor.min_sequence_number = self
            .min_sequence_number
            .unwrap_or(iceberg::spec::UNASSIGNED_SEQUENCE_NUMBER);
        descriptor.added_files_count = Some(added_files);
        descriptor.added_rows_count = Some(added_rows);
        descriptor.existing_files_count = Some(existing_files);
        descriptor.existing_rows_count = Some(existing_rows);
        descriptor.deleted_files_count = Some(deleted_files);
        descriptor.deleted_rows_count = Some(deleted_rows);
        descriptor.partitions = Some(
            self.bounds
                .into_iter()
                .zip(&self.partition)
                .map(|(bounds, field_type)| bounds.summary(field_type))
                .collect::<Result<_>>()?,
        );
        Ok((file.freeze(), descriptor))
    }
}

impl FieldBounds {
    fn summary(self, field_type: &PrimitiveType) -> Result<FieldSummary> {
        let bytes = |value: Option<PrimitiveLiteral>| {
            value
                .map(|v| {
                    datum(field_type, v)?
                        .to_bytes()
                        .map_err(|e| Error::Bug(format!("a partition bound: {e}")))
                })
                .transpose()
        };
        Ok(FieldSummary {
            contains_null: self.contains_null,
            contains_nan: Some(self.contains_nan),
            lower_bound: bytes(self.lower)?,
            upper_bound: bytes(self.upper)?,
        })
    }
}

/// Partition types whose Avro form this module writes: everything but a `fixed`.
fn encoded(field_type: &PrimitiveType) -> bool {
    use PrimitiveType::*;
    matches!(
        field_type,
        Boolean
            | Int
            | Long
            | Float
            | Double
            | Date
            | Time
            | Timestamp
            | Timestamptz
            | TimestampNs
            | TimestamptzNs
            | String
            | Binary
    )
}

/// The value of type `field_type` as a Datum, for its single-value serialization.
fn datum(field_type: &PrimitiveType, value: PrimitiveLiteral) -> Result<Datum> {
    use PrimitiveLiteral as L;
    use PrimitiveType as T;
    let bad = |value: &PrimitiveLiteral| {
        Error::Bug(format!("a partition value {value:?} of type {field_type}"))
    };
    Ok(match (field_type, value) {
        (T::Boolean, L::Boolean(b)) => Datum::bool(b),
        (T::Int, L::Int(n)) => Datum::int(n),
        (T::Date, L::Int(n)) => Datum::date(n),
        (T::Long, L::Long(n)) => Datum::long(n),
        (T::Time, L::Long(n)) => Datum::time_micros(n).map_err(|e| Error::Bug(e.to_string()))?,
        (T::Timestamp, L::Long(n)) => Datum::timestamp_micros(n),
        (T::Timestamptz, L::Long(n)) => Datum::timestamptz_micros(n),
        (T::TimestampNs, L::Long(n)) => Datum::timestamp_nanos(n),
        (T::TimestamptzNs, L::Long(n)) => Datum::timestamptz_nanos(n),
        (T::Float, L::Float(x)) => Datum::float(x.0),
        (T::Double, L::Double(x)) => Datum::double(x.0),
        (T::String, L::String(s)) => Datum::string(s),
        (T::Binary, L::Binary(b)) => Datum::binary(b),
        (_, other) => return Err(bad(&other)),
    })
}

fn primitive<'a>(literal: &'a Literal, path: &str) -> Result<&'a PrimitiveLiteral> {
    match literal {
        Literal::Primitive(p) => Ok(p),
        other => Err(Error::data_file(
            path,
            format!("a partition value that is not primitive: {other:?}"),
        )),
    }
}

fn put_primitive(
    out: &mut Vec<u8>,
    field_type: &PrimitiveType,
    literal: &Literal,
    path: &str,
) -> Result<()> {
    use PrimitiveLiteral as L;
    use PrimitiveType as T;
    match (field_type, primitive(literal, path)?) {
        (T::Boolean, L::Boolean(b)) => out.push(u8::from(*b)),
        (T::Int | T::Date, L::Int(n)) => put_int(out, *n),
        (
            T::Long | T::Time | T::Timestamp | T::Timestamptz | T::TimestampNs | T::TimestamptzNs,
            L::Long(n),
        ) => put_long(out, *n),
        (T::Float, L::Float(x)) => out.extend_from_slice(&x.0.to_le_bytes()),
        (T::Double, L::Double(x)) => out.extend_from_slice(&x.0.to_le_bytes()),
        (T::String, L::String(s)) => put_bytes(out, s.as_bytes()),
        (T::Binary, L::Binary(b)) => put_bytes(out, b),
        (_, other) => {
            return Err(Error::data_file(
                path,
                format!("a partition value {other:?} of type {field_type}"),
            ));
        }
    }
    Ok(())
}

fn missing(file: &DataFile) -> Error {
    Error::Bug(format!(
        "{}: an existing or deleted manifest entry without its file sequence number",
        file.file_path()
    ))
}

fn long(n: u64, file: &DataFile) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::data_file(file.file_path(), format!("{n} passes 2^63")))
}

/// Avro's long: zig-zag, then 7 bits a byte, low first.
fn put_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_int(out: &mut Vec<u8>, n: i32) {
    put_long(out, i64::from(n));
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_long(out, bytes.len() as i64);
    out.extend_from_slice(bytes);
}

/// A `["null", T]` union.
fn put_optional<T>(out: &mut Vec<u8>, value: Option<T>, put: impl Fn(&mut Vec<u8>, T)) {
    match value {
        None => put_long(out, 0),
        Some(v) => {
            put_long(out, 1);
            put(out, v);
        }
    }
}

/// An Avro array as one block of items and the empty block that ends it.
fn put_array<I: ExactSizeIterator>(
    out: &mut Vec<u8>,
    items: I,
    mut put: impl FnMut(&mut Vec<u8>, I::Item) -> Result<()>,
) -> Result<()> {
    if items.len() > 0 {
        put_long(out, items.len() as i64);
        for item in items {
            put(out, item)?;
        }
    }
    put_long(out, 0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use iceberg::io::FileIO;
    use iceberg::spec::{
        DataFileBuilder, DataFileFormat, Manifest, ManifestWriterBuilder, NestedField,
        PartitionSpec, Schema, Struct, Transform,
    };

    use super::*;

    fn schema() -> Arc<Schema> {
        let fields = [
            (1, "id", PrimitiveType::Long),
            (2, "name", PrimitiveType::String),
            (3, "day", PrimitiveType::Date),
            (4, "score", PrimitiveType::Double),
            (5, "flag", PrimitiveType::Boolean),
            (6, "at", PrimitiveType::Timestamptz),
            (7, "blob", PrimitiveType::Binary),
            (
                8,
                "price",
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
        ];
        Arc::new(
            Schema::builder()
                .with_fields(fields.into_iter().map(|(id, name, t)| {
                    Arc::new(NestedField::optional(id, name, Type::Primitive(t)))
                }))
                .build()
                .unwrap(),
        )
    }

    fn spec(schema: &Arc<Schema>, columns: &[(i32, &str)]) -> PartitionSpec {
        let mut builder = PartitionSpec::builder(schema.clone()).with_spec_id(0);
        for (id, name) in columns {
            builder = builder
                .add_unbound_field(iceberg::spec::UnboundPartitionField {
                    source_id: *id,
                    field_id: None,
                    name: (*name).to_string(),
                    transform: Transform::Identity,
                })
                .unwrap();
        }
        builder.build().unwrap()
    }

    fn file(n: i64, content: DataContentType, partition: Vec<Option<Literal>>) -> DataFile {
        let bounds = |k: i64| {
            HashMap::from([
                (1, Datum::long(n * k)),
                (2, Datum::string(format!("name-{n}-{k}"))),
                (4, Datum::double(n as f64 / 3.0)),
            ])
        };
        let mut builder = DataFileBuilder::default();
        builder
            .content(content)
            .file_path(format!("s3://bucket/table/part-{n}.parquet"))
            .file_format(match content {
                DataContentType::Data => DataFileFormat::Parquet,
                _ => DataFileFormat::Puffin,
            })
            .partition(Struct::from_iter(partition))
            .partition_spec_id(0)
            .record_count(10 + n as u64)
            .file_size_in_bytes(1000 + n as u64)
            .column_sizes(HashMap::from([(1, 100), (2, 200)]))
            .value_counts(HashMap::from([(1, 10), (2, 10), (4, 10)]))
            .null_value_counts(HashMap::from([(2, n as u64 % 3)]))
            .nan_value_counts(HashMap::from([(4, 0)]))
            .lower_bounds(bounds(1))
            .upper_bounds(bounds(2));
        if n % 2 == 0 {
            builder
                .split_offsets(Some(vec![4, 400 + n]))
                .first_row_id(Some(n * 100));
        }
        if n % 3 == 0 {
            builder.key_metadata(Some(vec![1, 2, 3])).sort_order_id(1);
        }
        if content != DataContentType::Data {
            builder
                .referenced_data_file(Some(format!("s3://bucket/table/data-{n}.parquet")))
                .content_offset(Some(4 + n))
                .content_size_in_bytes(Some(40 + n));
        }
        builder.build().unwrap()
    }

    /// The same entries written by iceberg's writer and by the encoder: iceberg reads both
    /// back as the same manifest, and both writers answer the same descriptor.
    async fn both_ways(
        spec: PartitionSpec,
        content: Content,
        v3: bool,
        files: &[DataFile],
    ) -> Result<()> {
        let io = FileIO::new_with_memory();
        let schema = schema();
        let builder = |location: &str| {
            let builder = ManifestWriterBuilder::new(
                io.new_output(location).unwrap(),
                Some(7),
                schema.clone(),
                spec.clone(),
            );
            match (content, v3) {
                (Content::Data, false) => builder.build_v2_data(),
                (Content::Deletes, false) => builder.build_v2_deletes(),
                (Content::Data, true) => builder.build_v3_data(),
                (Content::Deletes, true) => builder.build_v3_deletes(),
            }
        };
        let partition_type = spec.partition_type(&schema).unwrap();
        let mut theirs = builder("memory:///theirs.avro");
        let mut ours = EntryEncoder::for_partition(content, &partition_type).unwrap();
        for (i, file) in files.iter().enumerate() {
            match i % 3 {
                0 => {
                    theirs
                        .add_existing_file(file.clone(), 3, 2, Some(2))
                        .unwrap();
                    ours.existing(file, 3, 2, Some(2))?;
                }
                1 => {
                    theirs.add_delete_file(file.clone(), 1, Some(1)).unwrap();
                    ours.deleted(file, 7, 1, Some(1))?;
                }
                _ => {
                    theirs.add_file(file.clone(), 5).unwrap();
                    ours.added(file, 7, 5)?;
                }
            }
        }
        let their_descriptor = theirs.write_manifest_file().await.unwrap();
        let their_bytes = io
            .new_input("memory:///theirs.avro")
            .unwrap()
            .read()
            .await
            .unwrap();
        let empty = builder("memory:///theirs.avro");
        let empty_descriptor = empty.write_manifest_file().await.unwrap();
        let empty_bytes = io
            .new_input("memory:///theirs.avro")
            .unwrap()
            .read()
            .await
            .unwrap();
        let (our_bytes, mut our_descriptor) = ours.finish(empty_bytes, empty_descriptor)?;
        assert_eq!(
            Manifest::parse_avro(&our_bytes).unwrap(),
            Manifest::parse_avro(&their_bytes).unwrap()
        );
        our_descriptor.manifest_length = their_descriptor.manifest_length;
        assert_eq!(our_descriptor, their_descriptor);
        Ok(())
    }

    fn literals(n: i64) -> Vec<Option<Literal>> {
        vec![
            (n % 4 != 0).then(|| Literal::string(format!("p{}", n % 3))),
            Some(Literal::date(19_000 + n as i32)),
            Some(Literal::double(match n {
                4 => f64::NAN,
                _ => n as f64 - 2.5,
            })),
            Some(Literal::bool(n % 2 == 0)),
            (n != 1).then(|| Literal::Primitive(PrimitiveLiteral::Long(1_700_000_000_000_000 + n))),
            Some(Literal::binary(vec![n as u8, 0xff])),
        ]
    }

    const PARTITIONED: [(i32, &str); 6] = [
        (2, "name"),
        (3, "day"),
        (4, "score"),
        (5, "flag"),
        (6, "at"),
        (7, "blob"),
    ];

    #[tokio::test]
    async fn encoded_entries_read_back_as_icebergs_own() {
        let schema = schema();
        let data: Vec<DataFile> = (0..8)
            .map(|n| file(n, DataContentType::Data, vec![]))
            .collect();
        for v3 in [false, true] {
            both_ways(spec(&schema, &[]), Content::Data, v3, &data)
                .await
                .unwrap();
        }
        let partitioned: Vec<DataFile> = (0..9)
            .map(|n| file(n, DataContentType::Data, literals(n)))
            .collect();
        for v3 in [false, true] {
            both_ways(spec(&schema, &PARTITIONED), Content::Data, v3, &partitioned)
                .await
                .unwrap();
        }
        let deletes: Vec<DataFile> = (0..5)
            .map(|n| file(n, DataContentType::PositionDeletes, literals(n)))
            .collect();
        both_ways(
            spec(&schema, &PARTITIONED),
            Content::Deletes,
            true,
            &deletes,
        )
        .await
        .unwrap();
        // One block ends where the next begins.
        let many: Vec<DataFile> = (0..9_000)
            .map(|n| file(n, DataContentType::Data, vec![]))
            .collect();
        both_ways(spec(&schema, &[]), Content::Data, true, &many)
            .await
            .unwrap();
    }

    #[test]
    fn a_decimal_partition_is_left_to_icebergs_writer() {
        let schema = schema();
        let spec = spec(&schema, &[(8, "price")]);
        let partition_type = spec.partition_type(&schema).unwrap();
        assert!(EntryEncoder::for_partition(Content::Data, &partition_type).is_none());
        let spec = super::tests::spec(&schema, &PARTITIONED);
        let partition_type = spec.partition_type(&schema).unwrap();
        assert!(EntryEncoder::for_partition(Content::Data, &partition_type).is_some());
    }

    #[test]
    fn a_data_file_in_a_deletes_manifest_is_refused() {
        let mut encoder =
            EntryEncoder::for_partition(Content::Deletes, &StructType::new(vec![])).unwrap();
        let data = file(1, DataContentType::Data, vec![]);
        assert!(encoder.added(&data, 1, 1).is_err());
    }

    #[test]
    fn longs_are_zig_zag_varints() {
        for (n, bytes) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
            (
                i64::MAX,
                vec![0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
            (
                i64::MIN,
                vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            put_long(&mut out, n);
            assert_eq!(out, bytes, "{n}");
        }
    }
}
