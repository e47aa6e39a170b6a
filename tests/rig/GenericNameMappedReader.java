/*
 * Java Iceberg 1.10.2's generic reader, with the table's name mapping applied: a reading
 * service for the test rig. tests/rig/java_generic.py compiles it with javac against the
 * runtime jar of the Java Iceberg kit's venv and starts it once per test session.
 *
 * Why not IcebergGenerics (what ../shared/tools/java-iceberg/read_generic.py calls): its
 * GenericReader never passes `schema.name-mapping.default` to Parquet.read, so a data file
 * without field IDs (every file Delta writes without column mapping) gets positional
 * top-level IDs instead (apache/iceberg#6122). That reads flat tables by luck and fails on
 * nested ones ("Not a struct type: map<string, variant>", a NullPointerException in
 * BaseParquetReaders.struct). This class does what GenericReader.openFile does, per
 * FileScanTask, plus withNameMapping: the way Spark's Iceberg reader (and so Athena, EMR,
 * Trino) read such files.
 *
 * One JSON request per stdin line, one JSON answer per stdout line:
 *   {"location": "file:///…/00003-….metadata.json", "out": "/tmp/…/read-1",
 *    "snapshot_id": id, "columns": ["id", "place.name"]}        (the last two optional)
 *   -> {"ok": true}, with OUT.jsonl (one object per row: the projected columns, plus
 *      _row_id and _last_updated_sequence_number, null before format version 3) and
 *      OUT.meta.json (format-version, next-row-id, the snapshot's id, first-row-id and
 *      added-rows, its data files with record-count, first-row-id and delete files, and
 *      every field of the snapshot's schema as Java parsed it: id, name, type,
 *      initial-default, write-default, and crs / algorithm of geometry and geography), or
 *   -> {"ok": false, "error": "<the innermost causes>"}
 * Values as read_generic.py writes them: variant as its JSON text (in it dates, times,
 * timestamps and UUIDs as ISO strings, binary as base64, decimals as plain numbers);
 * decimals as strings; date as days, time as microseconds, timestamps as microseconds since
 * the epoch (nanoseconds for timestamp_ns); binary and fixed as hex; uuid as text; maps as
 * [key, value] pairs; NaN and infinities as strings. Deletes (position, equality, deletion
 * vectors) are applied by GenericDeleteFilter, as GenericReader applies them.
 */

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.StringWriter;
import java.io.Writer;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.Schema;
import org.apache.iceberg.SingleValueParser;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StaticTableOperations;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.TableScan;
import org.apache.iceberg.data.GenericDeleteFilter;
import org.apache.iceberg.data.IdentityPartitionConverters;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.data.parquet.GenericParquetReaders;
import org.apache.iceberg.hadoop.HadoopFileIO;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.mapping.NameMapping;
import org.apache.iceberg.mapping.NameMappingParser;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonGenerator;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.JsonNode;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.TypeUtil;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.ByteBuffers;
import org.apache.iceberg.util.DateTimeUtil;
import org.apache.iceberg.util.JsonUtil;
import org.apache.iceberg.util.PartitionUtil;
import org.apache.iceberg.variants.PhysicalType;
import org.apache.iceberg.variants.Variant;
import org.apache.iceberg.variants.VariantArray;
import org.apache.iceberg.variants.VariantObject;
import org.apache.iceberg.variants.VariantValue;

public class GenericNameMappedReader {
  public static void main(String[] args) throws Exception {
    // Answers go to the real stdout; anything a library prints goes to stderr.
    PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
    System.setOut(System.err);
    FileIO io = new HadoopFileIO(new Configuration());
    answers.println("{\"ready\": \"" + org.apache.iceberg.IcebergBuild.version() + "\"}");
    BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = requests.readLine()) != null) {
      Map<String, Object> answer = new LinkedHashMap<>();
      try {
        read(io, JsonUtil.mapper().readTree(line));
        answer.put("ok", true);
      } catch (Throwable e) { // every failure is an answer; the service goes on
        answer.put("ok", false);
        answer.put("error", causes(e));
      }
      answers.println(JsonUtil.mapper().writeValueAsString(answer));
    }
  }

  static void read(FileIO io, JsonNode request) throws Exception {
    String location = request.get("location").asText();
    String out = request.get("out").asText();
    StaticTableOperations ops = new StaticTableOperations(location, io);
    BaseTable table = new BaseTable(ops, location);
    TableMetadata md = ops.current();
    boolean v3 = md.formatVersion() >= 3;
    TableScan scan = table.newScan();
    JsonNode snapshotId = request.get("snapshot_id");
    if (snapshotId != null && !snapshotId.isNull()) {
      scan = scan.useSnapshot(snapshotId.asLong());
    }
    Schema schema = scan.schema(); // the snapshot's own schema
    List<Types.NestedField> columns = new ArrayList<>(schema.columns());
    JsonNode wanted = request.get("columns");
    if (wanted != null && !wanted.isNull()) {
      List<String> names = new ArrayList<>();
      wanted.forEach(n -> names.add(n.asText()));
      columns = new ArrayList<>(schema.select(names).columns());
    }
    if (v3) {
      columns.add(MetadataColumns.ROW_ID);
      columns.add(MetadataColumns.LAST_UPDATED_SEQUENCE_NUMBER);
    }
    Schema projection = new Schema(columns);
    String mappingJson = md.properties().get(TableProperties.DEFAULT_NAME_MAPPING);
    NameMapping mapping = mappingJson == null ? null : NameMappingParser.fromJson(mappingJson);

    List<Map<String, Object>> files = new ArrayList<>();
    try (Writer rows = Files.newBufferedWriter(Paths.get(out + ".jsonl"), StandardCharsets.UTF_8);
        CloseableIterable<FileScanTask> tasks = scan.planFiles()) {
      for (FileScanTask task : tasks) {
        files.add(describe(task));
        try (CloseableIterable<Record> records = open(io, task, table.schema(), projection, mapping)) {
          for (Record record : records) {
            rows.write(row(record, columns, v3));
            rows.write('\n');
          }
        }
      }
    }
    Files.write(Paths.get(out + ".meta.json"), meta(md, scan.snapshot(), schema, files, mapping != null)
        .getBytes(StandardCharsets.UTF_8));
  }

  /** GenericReader.open + openFile (PARQUET) for one task, with the name mapping. */
  static CloseableIterable<Record> open(FileIO io, FileScanTask task, Schema tableSchema, Schema projection,
      NameMapping mapping) {
    GenericDeleteFilter deletes = new GenericDeleteFilter(io, task, tableSchema, projection);
    Schema readSchema = deletes.requiredSchema();
    // _row_id and _last_updated_sequence_number (first-row-id, sequence number) and identity
    // partition values come in as constants, as in GenericReader.
    Map<Integer, ?> constants = PartitionUtil.constantsMap(task, IdentityPartitionConverters::convertConstant);
    Parquet.ReadBuilder builder = Parquet.read(io.newInputFile(task.file().location()))
        .project(readSchema)
        .createReaderFunc(fileSchema -> GenericParquetReaders.buildReader(readSchema, fileSchema, constants))
        .split(task.start(), task.length());
    if (mapping != null) {
      builder = builder.withNameMapping(mapping); // what IcebergGenerics leaves out (apache/iceberg#6122)
    }
    CloseableIterable<Record> records = builder.build();
    return deletes.filter(records);
  }

  static String row(Record record, List<Types.NestedField> columns, boolean v3) throws Exception {
    StringWriter text = new StringWriter();
    try (JsonGenerator gen = JsonUtil.factory().createGenerator(text)) {
      gen.writeStartObject();
      for (Types.NestedField column : columns) {
        gen.writeFieldName(column.name());
        // by name: with deletes to apply the reader adds columns of its own (_pos)
        value(gen, column.type(), record.getField(column.name()));
      }
      if (!v3) {
        gen.writeNullField(MetadataColumns.ROW_ID.name());
        gen.writeNullField(MetadataColumns.LAST_UPDATED_SEQUENCE_NUMBER.name());
      }
      gen.writeEndObject();
    }
    return text.toString();
  }

  static void value(JsonGenerator gen, Type type, Object v) throws Exception {
    if (v == null) {
      gen.writeNull();
      return;
    }
    switch (type.typeId()) {
      case STRUCT: {
        Record record = (Record) v;
        List<Types.NestedField> fields = type.asStructType().fields();
        gen.writeStartObject();
        for (int i = 0; i < fields.size(); i++) {
          gen.writeFieldName(fields.get(i).name());
          value(gen, fields.get(i).type(), record.get(i));
        }
        gen.writeEndObject();
        return;
      }
      case LIST:
        gen.writeStartArray();
        for (Object element : (List<?>) v) {
          value(gen, type.asListType().elementType(), element);
        }
        gen.writeEndArray();
        return;
      case MAP:
        gen.writeStartArray();
        for (Map.Entry<?, ?> entry : ((Map<?, ?>) v).entrySet()) {
          gen.writeStartArray();
          value(gen, type.asMapType().keyType(), entry.getKey());
          value(gen, type.asMapType().valueType(), entry.getValue());
          gen.writeEndArray();
        }
        gen.writeEndArray();
        return;
      case TIMESTAMP:
        gen.writeNumber(((Types.TimestampType) type).shouldAdjustToUTC()
            ? DateTimeUtil.microsFromTimestamptz((OffsetDateTime) v)
            : DateTimeUtil.microsFromTimestamp((LocalDateTime) v));
        return;
      case TIMESTAMP_NANO:
        gen.writeNumber(((Types.TimestampNanoType) type).shouldAdjustToUTC()
            ? DateTimeUtil.nanosFromTimestamptz((OffsetDateTime) v)
            : DateTimeUtil.nanosFromTimestamp((LocalDateTime) v));
        return;
      case DATE:
        gen.writeNumber(DateTimeUtil.daysFromDate((LocalDate) v));
        return;
      case TIME:
        gen.writeNumber(DateTimeUtil.microsFromTime((LocalTime) v));
        return;
      case FLOAT:
        gen.writeRawValue(floating(((Float) v).doubleValue()));
        return;
      case DOUBLE:
        gen.writeRawValue(floating((Double) v));
        return;
      case DECIMAL:
        gen.writeString(((BigDecimal) v).toPlainString());
        return;
      case FIXED:
        gen.writeString(hex((byte[]) v));
        return;
      case BINARY:
      case GEOMETRY:
      case GEOGRAPHY:
        gen.writeString(hex(ByteBuffers.toByteArray((ByteBuffer) v)));
        return;
      case VARIANT:
        gen.writeString(variantJson(((Variant) v).value()));
        return;
      case BOOLEAN:
        gen.writeBoolean((Boolean) v);
        return;
      case INTEGER:
      case LONG:
        gen.writeNumber(((Number) v).longValue());
        return;
      default: // string, uuid
        gen.writeString(v.toString());
    }
  }

  /** A variant value as JSON text, as read_generic.py's variant_json writes it. */
  static String variantJson(VariantValue v) throws Exception {
    PhysicalType kind = v.type();
    if (kind == PhysicalType.OBJECT) {
      VariantObject object = v.asObject();
      List<String> members = new ArrayList<>();
      for (String name : object.fieldNames()) {
        members.add(quote(name) + ":" + variantJson(object.get(name)));
      }
      return "{" + String.join(",", members) + "}";
    }
    if (kind == PhysicalType.ARRAY) {
      VariantArray array = v.asArray();
      List<String> elements = new ArrayList<>();
      for (int i = 0; i < array.numElements(); i++) {
        elements.add(variantJson(array.get(i)));
      }
      return "[" + String.join(",", elements) + "]";
    }
    Object x = v.asPrimitive().get();
    switch (kind) {
      case NULL:
        return "null";
      case DECIMAL4:
      case DECIMAL8:
      case DECIMAL16:
        return ((BigDecimal) x).toPlainString();
      case FLOAT:
        return floating(((Number) x).doubleValue());
      case DOUBLE:
        return floating(((Number) x).doubleValue());
      case DATE:
        return quote(DateTimeUtil.daysToIsoDate(((Number) x).intValue()));
      case TIME:
        return quote(DateTimeUtil.microsToIsoTime(((Number) x).longValue()));
      case TIMESTAMPTZ:
        return quote(DateTimeUtil.microsToIsoTimestamptz(((Number) x).longValue()));
      case TIMESTAMPNTZ:
        return quote(DateTimeUtil.microsToIsoTimestamp(((Number) x).longValue()));
      case TIMESTAMPTZ_NANOS:
        return quote(DateTimeUtil.nanosToIsoTimestamptz(((Number) x).longValue()));
      case TIMESTAMPNTZ_NANOS:
        return quote(DateTimeUtil.nanosToIsoTimestamp(((Number) x).longValue()));
      case BINARY:
        return quote(Base64.getEncoder().encodeToString(ByteBuffers.toByteArray((ByteBuffer) x)));
      case STRING:
      case UUID:
        return quote(x.toString());
      default: // booleans and integers
        return x.toString();
    }
  }

  /** A finite number as JSON, NaN and the infinities as strings (JSON has no such numbers). */
  static String floating(double d) throws Exception {
    return Double.isFinite(d) ? Double.toString(d) : quote(Double.toString(d));
  }

  static String quote(String s) throws Exception {
    return JsonUtil.mapper().writeValueAsString(s);
  }

  static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder();
    for (byte b : bytes) {
      out.append(String.format("%02x", b));
    }
    return out.toString();
  }

  static Map<String, Object> describe(FileScanTask task) {
    Map<String, Object> file = new LinkedHashMap<>();
    file.put("path", task.file().location());
    file.put("record-count", task.file().recordCount());
    file.put("first-row-id", task.file().firstRowId()); // inherited where the entry has none
    List<Map<String, Object>> deletes = new ArrayList<>();
    for (DeleteFile d : task.deletes()) {
      Map<String, Object> delete = new LinkedHashMap<>();
      delete.put("path", d.location());
      delete.put("content", d.content().toString());
      delete.put("format", d.format().toString());
      delete.put("record-count", d.recordCount());
      deletes.add(delete);
    }
    file.put("deletes", deletes);
    return file;
  }

  static String meta(TableMetadata md, Snapshot snapshot, Schema schema, List<Map<String, Object>> files,
      boolean nameMapping) throws Exception {
    boolean v3 = md.formatVersion() >= 3;
    Map<String, Object> meta = new LinkedHashMap<>();
    meta.put("format-version", md.formatVersion());
    meta.put("next-row-id", v3 ? md.nextRowId() : null);
    meta.put("snapshot-id", snapshot == null ? null : snapshot.snapshotId());
    meta.put("first-row-id", snapshot == null ? null : snapshot.firstRowId());
    meta.put("added-rows", snapshot == null ? null : snapshot.addedRows());
    meta.put("name-mapping-applied", nameMapping);
    files.sort((a, b) -> a.get("path").toString().compareTo(b.get("path").toString()));
    meta.put("data-files", files);
    List<Map<String, Object>> fields = new ArrayList<>();
    for (Map.Entry<Integer, Types.NestedField> entry :
        new TreeMap<>(TypeUtil.indexById(schema.asStruct())).entrySet()) {
      Types.NestedField f = entry.getValue();
      Map<String, Object> field = new LinkedHashMap<>();
      field.put("id", entry.getKey());
      field.put("name", schema.findColumnName(entry.getKey()));
      field.put("type", f.type().toString());
      field.put("initial-default", defaultValue(f.type(), f.initialDefault()));
      field.put("write-default", defaultValue(f.type(), f.writeDefault()));
      if (f.type() instanceof Types.GeometryType) {
        field.put("crs", ((Types.GeometryType) f.type()).crs());
      } else if (f.type() instanceof Types.GeographyType) {
        Types.GeographyType geography = (Types.GeographyType) f.type();
        field.put("crs", geography.crs());
        field.put("algorithm", geography.algorithm() == null ? null : geography.algorithm().toString());
      }
      fields.add(field);
    }
    meta.put("fields", fields);
    return JsonUtil.mapper().writerWithDefaultPrettyPrinter().writeValueAsString(meta) + "\n";
  }

  /** A default in the spec's JSON single-value form, as Java serializes it. */
  static JsonNode defaultValue(Type type, Object value) throws Exception {
    return value == null ? null : JsonUtil.mapper().readTree(SingleValueParser.toJson(type, value));
  }

  static String causes(Throwable e) {
    List<String> chain = new ArrayList<>();
    for (Throwable t = e; t != null && chain.size() < 8; t = t.getCause()) {
      chain.add(t.getClass().getName() + ": " + t.getMessage());
    }
    return String.join(" | caused by ", chain.subList(Math.max(0, chain.size() - 3), chain.size()));
  }
}
