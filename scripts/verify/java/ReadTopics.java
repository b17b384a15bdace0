/*
 * Independent read-committed reader for the verifier, written against the reference Java client
 * (org.apache.kafka:kafka-clients) only. It shares no code with the library under test.
 *
 *   java -cp <dir of ReadTopics.class>:<kafka jars>/* ReadTopics <bootstrap servers> <topic> [<topic>...]
 *
 * Assigns every partition of every named topic (no consumer group, nothing committed), with
 * isolation.level=read_committed, seeks to the beginning, takes each partition's end offset once at the start
 * (endOffsets under read_committed = the last stable offset) and reads until every partition's position has
 * reached it. Records at or past that snapshot end are not printed, so the output is one consistent snapshot.
 *
 * stdout carries JSON lines only (UTF-8), one per record:
 *   {"topic":"t","partition":0,"offset":"17","key":"<base64>"|null,"value":"<base64>"|null,
 *    "headers":[["name","<base64>"|null],...],"timestamp":"1700000000000"}
 * (offset and timestamp are decimal strings: a JSON number would lose precision above 2^53), then one summary line:
 *   {"done":true,"counts":{"t":12},"endOffsets":{"t":{"0":"17"}}}
 * Anything else (client logging, errors) goes to stderr: System.out is redirected to stderr before any Kafka
 * class loads, and the JSON goes straight to file descriptor 1. Exit codes: 0 done, 1 error, 2 usage.
 *
 * Optional system properties:
 *   -Dverify.timeoutMs=N  give up (exit 1, with each unfinished partition's position and end on stderr) after N ms
 *                         in total; 0 or absent = no limit.
 *   -Dverify.clientId=S   client.id (default verify-read-topics).
 * A topic that does not exist is an error (exit 1), not an empty result.
 */

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ReadTopics {
  private static final Base64.Encoder B64 = Base64.getEncoder();

  public static void main(String[] args) {
    // The real stdout, for JSON only; everything that prints to System.out (a logging binding's default console
    // appender, a library's println) lands on stderr instead.
    PrintStream json = new PrintStream(
        new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false, StandardCharsets.UTF_8);
    System.setOut(System.err);
    int code;
    try {
      code = run(args, json);
    } catch (Throwable t) {
      System.err.println("ReadTopics: " + t);
      t.printStackTrace(System.err);
      code = 1;
    }
    json.flush();
    if (json.checkError() && code == 0) {
      System.err.println("ReadTopics: writing to stdout failed");
      code = 1;
    }
    System.exit(code);
  }

  private static int run(String[] args, PrintStream json) {
    if (args.length < 2) {
      System.err.println("usage: ReadTopics <bootstrap servers> <topic> [<topic>...]");
      return 2;
    }
    String bootstrap = args[0];
    Set<String> topics = new LinkedHashSet<>();
    for (int i = 1; i < args.length; i++) topics.add(args[i]);
    long timeoutMs = Long.parseLong(System.getProperty("verify.timeoutMs", "0"));
    long deadline = timeoutMs > 0 ? System.currentTimeMillis() + timeoutMs : Long.MAX_VALUE;

    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, System.getProperty("verify.clientId", "verify-read-topics"));
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");

    Map<String, Long> counts = new LinkedHashMap<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      List<TopicPartition> all = new ArrayList<>();
      for (String topic : topics) {
        List<PartitionInfo> infos = consumer.partitionsFor(topic, apiTimeout(deadline));
        if (infos == null || infos.isEmpty()) {
          throw new IllegalStateException("topic " + topic + " does not exist (no partitions in the metadata)");
        }
        for (PartitionInfo info : infos) all.add(new TopicPartition(topic, info.partition()));
        counts.put(topic, 0L);
      }
      all.sort((a, b) -> a.topic().equals(b.topic())
          ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));

      consumer.assign(all);
      consumer.seekToBeginning(all);
      Map<TopicPartition, Long> ends = consumer.endOffsets(all, apiTimeout(deadline));

      Set<TopicPartition> open = new LinkedHashSet<>(all);
      closeFinished(consumer, open, ends, deadline);
      while (!open.isEmpty()) {
        if (System.currentTimeMillis() > deadline) {
          StringBuilder sb = new StringBuilder("timed out after " + timeoutMs + " ms; unfinished partitions:");
          for (TopicPartition tp : open) {
            sb.append(' ').append(tp).append(" at ").append(consumer.position(tp, Duration.ofSeconds(5)))
                .append(" of ").append(ends.get(tp));
          }
          throw new IllegalStateException(sb.toString());
        }
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
        for (ConsumerRecord<byte[], byte[]> r : records) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          if (r.offset() >= ends.get(tp)) continue; // past the snapshot taken at the start
          json.append(toJson(r)).append('\n');
          counts.merge(r.topic(), 1L, Long::sum);
        }
        closeFinished(consumer, open, ends, deadline);
      }

      StringBuilder done = new StringBuilder("{\"done\":true,\"counts\":{");
      boolean first = true;
      for (Map.Entry<String, Long> e : counts.entrySet()) {
        if (!first) done.append(',');
        first = false;
        str(done, e.getKey()).append(':').append(e.getValue());
      }
      done.append("},\"endOffsets\":{");
      Map<String, Map<Integer, Long>> byTopic = new LinkedHashMap<>();
      for (TopicPartition tp : all) byTopic.computeIfAbsent(tp.topic(), k -> new LinkedHashMap<>()).put(tp.partition(), ends.get(tp));
      first = true;
      for (Map.Entry<String, Map<Integer, Long>> e : byTopic.entrySet()) {
        if (!first) done.append(',');
        first = false;
        str(done, e.getKey()).append(":{");
        boolean firstP = true;
        for (Map.Entry<Integer, Long> pe : e.getValue().entrySet()) {
          if (!firstP) done.append(',');
          firstP = false;
          done.append('"').append(pe.getKey()).append("\":\"").append(pe.getValue()).append('"');
        }
        done.append('}');
      }
      done.append("}}");
      json.append(done).append('\n');
    }
    return 0;
  }

  /** Removes (and pauses) every partition whose position has reached its snapshot end. */
  private static void closeFinished(KafkaConsumer<byte[], byte[]> consumer, Set<TopicPartition> open,
      Map<TopicPartition, Long> ends, long deadline) {
    List<TopicPartition> finished = new ArrayList<>();
    for (TopicPartition tp : open) {
      if (consumer.position(tp, apiTimeout(deadline)) >= ends.get(tp)) finished.add(tp);
    }
    if (!finished.isEmpty()) {
      consumer.pause(finished);
      open.removeAll(finished);
    }
  }

  private static Duration apiTimeout(long deadline) {
    long left = deadline == Long.MAX_VALUE ? 60_000 : Math.max(1_000, deadline - System.currentTimeMillis());
    return Duration.ofMillis(Math.min(60_000, left));
  }

  private static CharSequence toJson(ConsumerRecord<byte[], byte[]> r) {
    StringBuilder sb = new StringBuilder(256);
    sb.append("{\"topic\":");
    str(sb, r.topic());
    sb.append(",\"partition\":").append(r.partition());
    sb.append(",\"offset\":\"").append(r.offset()).append('"');
    sb.append(",\"key\":");
    b64(sb, r.key());
    sb.append(",\"value\":");
    b64(sb, r.value());
    sb.append(",\"headers\":[");
    boolean first = true;
    for (Header h : r.headers()) {
      if (!first) sb.append(',');
      first = false;
      sb.append('[');
      str(sb, h.key());
      sb.append(',');
      b64(sb, h.value());
      sb.append(']');
    }
    sb.append("],\"timestamp\":\"").append(r.timestamp()).append("\"}");
    return sb;
  }

  private static void b64(StringBuilder sb, byte[] bytes) {
    if (bytes == null) sb.append("null");
    else sb.append('"').append(B64.encodeToString(bytes)).append('"');
  }

  private static StringBuilder str(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': sb.append("\\\""); break;
        case '\\': sb.append("\\\\"); break;
        case '\n': sb.append("\\n"); break;
        case '\r': sb.append("\\r"); break;
        case '\t': sb.append("\\t"); break;
        default:
          if (c < 0x20 || Character.isSurrogate(c) && !validSurrogate(s, i)) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
      }
    }
    return sb.append('"');
  }

  private static boolean validSurrogate(String s, int i) {
    char c = s.charAt(i);
    if (Character.isHighSurrogate(c)) return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
    return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
  }
}
