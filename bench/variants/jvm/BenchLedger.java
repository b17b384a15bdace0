/*
 * Bench variant J: the ledger rule written by hand on the JVM with the reference Kafka client (kafka-clients) and
 * pgjdbc, the way an expert would write it to be fast: one Kafka transaction and one PostgreSQL transaction per
 * poll, set-based SQL. Started by bench/bench.js through bench/variants/jvm/build.js (which fetches the jars and
 * compiles this file once); the JVM start-up is part of the variant's measured start-up.
 *
 * Environment (set by bench/bench.js): BENCH_BROKERS (host:port,...), BENCH_INPUT, BENCH_OUTPUT (exists),
 * BENCH_GROUP, DATABASE_URL (postgres://user[:password]@host[:port]/db, turned into a JDBC URL here).
 *
 * What it does, per poll (up to max.poll.records = 1000 records):
 *   1. Decode each record by hand: its value is Avro single-object encoding of com.example.PaymentRequested
 *      (C3 01, an 8-byte schema fingerprint, then paymentId string, accountId string, amountCents long,
 *      requestedAt string; a string is a zigzag-varint length + UTF-8, a long a zigzag varint). Four fields do
 *      not need an Avro library. The message id is the `message-id` header's raw bytes (the UTF-8 of
 *      topic/partition/offset when it is missing or empty), kept as bytes: an id may be any bytes, and decoding
 *      it as text could merge two distinct ids or carry a NUL that a text column refuses.
 *   2. One PostgreSQL transaction (READ COMMITTED, auto-commit off):
 *      a. claim the poll's message ids in `inbox` (bytea) with one multi-row INSERT ... SELECT unnest(?) ON CONFLICT DO
 *         NOTHING RETURNING message_id; only the records it returns are applied (each id once, in record order),
 *         so a record delivered twice (a republished duplicate) is skipped;
 *      b. drop payments whose payment_id is already in `ledger` (one SELECT ... = ANY(?)), or repeated in the poll;
 *      c. create the missing accounts at balance 0 and lock all of the poll's accounts in ONE statement: INSERT ...
 *         SELECT unnest(sorted ids) ORDER BY id ON CONFLICT DO UPDATE (a no-op update, which takes the row lock)
 *         RETURNING the balances. Locks are taken in account order, so two J processes cannot deadlock;
 *      d. fold the payments in Java, in record order per account (records of an account share a key, hence a
 *         partition, and a poll keeps each partition's order): ACCEPTED when balance + amountCents >= 0 (the
 *         balance becomes the candidate), else REJECTED_INSUFFICIENT_FUNDS (balance unchanged);
 *      e. write every ledger row with one INSERT ... SELECT FROM unnest(5 arrays), and every changed balance with
 *         one UPDATE ... FROM unnest(2 arrays).
 *      Five statements and a COMMIT per poll whatever its size (C runs several statements per record).
 *   3. One Kafka transaction: one output record per applied payment (key accountId, value a small JSON
 *      {paymentId, accountId, amountCents, status, balanceAfterCents}), then sendOffsetsToTransaction(the next
 *      offset of every partition in the poll, consumer.groupMetadata()) (KIP-447: the group generation fences a
 *      zombie, so one producer with one transactional.id derived from the group is enough), commitTransaction.
 *   4. COMMIT PostgreSQL, only after Kafka's commit succeeded.
 * On any error before Kafka's commit: abort the Kafka transaction, roll PostgreSQL back, exit 1 (bench counts an
 * exit as a failure; a restart resumes from the group's committed offsets and redoes the whole poll, since
 * neither the outputs, the offsets nor the database effects were committed).
 *
 * The guarantee, honestly: two transactions committed one after the other are not one atomic commit.
 *   - Failure before or in Kafka's commit: both roll back; the poll is redelivered and applied once. Exactly once.
 *   - Failure (crash, lost connection, a failed COMMIT) after Kafka's commit and before PostgreSQL's: the outputs
 *     and the offsets are committed, the poll's database effects (inbox claims, ledger rows, balances) are rolled
 *     back, and nothing redelivers those records. Nothing is applied twice (the inbox claims rolled back with
 *     everything else, and the offsets moved past the records anyway), but the poll's payments are missing from
 *     the ledger and balances while their outcomes were published: the database side is at-most-once in that
 *     window. The program says so on stderr and exits 1; recovering needs an operator.
 *   - The other order (PostgreSQL first) would move the hole, not close it: a crash between the commits leaves
 *     the effects applied and the records redelivered, the inbox then skips them as duplicates, and J keeps no
 *     record of the outputs it would have sent, so it cannot replay them: those outcomes are never published.
 *   - An ambiguous Kafka commit (commitTransaction timing out, the outcome unknown) is treated as failed, which
 *     is the first case if it did not commit and the second if it did.
 * Closing the window needs the outputs (and the consumed offsets) stored in PostgreSQL in the same database
 * transaction and published from there, which is what the library does; J is the fast hand-written baseline
 * with that weaker guarantee. The inbox in J therefore guards against duplicated input records, not against
 * J's own restarts (those are covered by the offsets committed in the Kafka transaction).
 *
 * Choices:
 *   - isolation.level=read_committed, enable.auto.commit=false (offsets go only through the transaction),
 *     auto.offset.reset=earliest; max.poll.records=1000 (a transaction commit costs a few round trips to the
 *     transaction coordinator and a PostgreSQL commit an fsync: both are amortised over up to 1000 records);
 *     fetch sizes: 1 MiB per partition, 16 MiB per fetch, fetch.min.bytes=1 (a backlog fills a fetch anyway,
 *     a trickle is not held back).
 *   - Producer: idempotent, acks=all, transactional.id = <group>.txn (stable, so a restart's initTransactions
 *     aborts a crashed predecessor's open transaction instead of leaving it until its timeout);
 *     batch.size=64 KiB, linger.ms=5 (commitTransaction flushes anyway). One J process per group, as the bench
 *     runs it: a second process with the same transactional.id would fence the first (give each its own suffix
 *     to run several; KIP-447 makes the group generation, not the transactional.id, fence zombies).
 *   - A rebalance between a poll and its commit makes sendOffsetsToTransaction/commitTransaction fail (the
 *     generation is stale): that is an error like any other here (abort, roll back, exit 1).
 *   - Shutdown: SIGTERM runs a hook that wakes the consumer up; the poll loop ends between polls (a poll in
 *     progress finishes its two commits first), the clients and the connection are closed, exit 0.
 *   - Output values are JSON, not Avro: the consumers in the bench compare the work of reading, applying and
 *     committing; the output encoding is a minor part of it.
 */
import java.net.URI;
import java.net.URLDecoder;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Array;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class BenchLedger {
  private static final String ACCEPTED = "ACCEPTED";
  private static final String REJECTED = "REJECTED_INSUFFICIENT_FUNDS";

  /** BENCH_J_TRACE=1: one stderr line per poll with the time of each step. */
  private static final boolean TRACE = "1".equals(System.getenv("BENCH_J_TRACE"));
  private static volatile boolean stopping = false;
  private static volatile int exitStatus = 0;
  private static final CountDownLatch finished = new CountDownLatch(1);

  private record Payment(byte[] messageId, String paymentId, String accountId, long amountCents) {}

  private record Outcome(Payment payment, String status, long balanceAfterCents) {}

  public static void main(String[] args) {
    String brokers = need("BENCH_BROKERS");
    String input = need("BENCH_INPUT");
    String output = need("BENCH_OUTPUT");
    String group = need("BENCH_GROUP");
    String databaseUrl = need("DATABASE_URL");

    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig(brokers, group));
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stopping = true;
      try {
        consumer.wakeup();
      } catch (RuntimeException ignored) {
        // already closed
      }
      try {
        finished.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException ignored) {
        Thread.currentThread().interrupt();
      }
      // Exit with the main loop's status (0 after a clean stop) rather than the JVM's 143 for SIGTERM.
      Runtime.getRuntime().halt(finished.getCount() == 0 ? exitStatus : 1);
    }, "bench-j-shutdown"));

    int status = 0;
    try {
      run(consumer, brokers, input, output, group, databaseUrl);
    } catch (Throwable t) {
      System.err.println("J: failed: " + t);
      t.printStackTrace();
      status = 1;
    }
    exitStatus = status;
    finished.countDown();
    if (!stopping) System.exit(status); // else the shutdown hook is waiting for us and exits with `status`
  }

  private static void run(KafkaConsumer<byte[], byte[]> consumer, String brokers, String input, String output,
      String group, String databaseUrl) throws Exception {
    long started = System.nanoTime();
    long polls = 0;
    long records = 0;
    long applied = 0;
    try (Connection db = connect(databaseUrl)) {
      createTables(db);
      db.setAutoCommit(false);
      KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerConfig(brokers, group));
      try {
        producer.initTransactions();
        Ledger ledger = new Ledger(db);
        consumer.subscribe(List.of(input));
        System.err.printf("J: consuming %s as %s, producing to %s%n", input, group, output);
        while (!stopping) {
          ConsumerRecords<byte[], byte[]> batch;
          try {
            batch = consumer.poll(Duration.ofMillis(500));
          } catch (WakeupException e) {
            if (stopping) break;
            throw e;
          }
          if (batch.isEmpty()) continue;
          polls++;
          records += batch.count();
          applied += processPoll(batch, consumer, producer, db, ledger, output);
        }
      } finally {
        producer.close(Duration.ofSeconds(5));
      }
    } finally {
      consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
      System.err.printf("J: stopped after %d polls, %d records, %d payments applied, %.1f s%n", polls, records, applied,
          (System.nanoTime() - started) / 1e9);
    }
  }

  /** One poll: one PostgreSQL transaction, one Kafka transaction, Kafka committed first. Returns the payments applied. */
  private static int processPoll(ConsumerRecords<byte[], byte[]> batch, KafkaConsumer<byte[], byte[]> consumer,
      KafkaProducer<byte[], byte[]> producer, Connection db, Ledger ledger, String output) throws Exception {
    List<Payment> payments = new ArrayList<>(batch.count());
    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
    for (TopicPartition tp : batch.partitions()) {
      List<ConsumerRecord<byte[], byte[]>> list = batch.records(tp);
      for (ConsumerRecord<byte[], byte[]> r : list) payments.add(decode(r));
      offsets.put(tp, new OffsetAndMetadata(list.get(list.size() - 1).offset() + 1));
    }

    boolean inKafkaTransaction = false;
    List<Outcome> outcomes;
    long t0 = System.nanoTime();
    long t1;
    long t2;
    try {
      outcomes = ledger.apply(payments);
      t1 = System.nanoTime();
      producer.beginTransaction();
      inKafkaTransaction = true;
      for (Outcome o : outcomes) {
        producer.send(new ProducerRecord<>(output, o.payment().accountId().getBytes(StandardCharsets.UTF_8), json(o)));
      }
      producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
      producer.commitTransaction(); // throws if any send above failed
      inKafkaTransaction = false;
      t2 = System.nanoTime();
    } catch (Exception e) {
      if (inKafkaTransaction) {
        try {
          producer.abortTransaction();
        } catch (RuntimeException abortFailure) {
          e.addSuppressed(abortFailure); // fenced or fatal: the broker aborts it (fencing or timeout)
        }
      }
      try {
        db.rollback();
      } catch (SQLException rollbackFailure) {
        e.addSuppressed(rollbackFailure);
      }
      throw e;
    }
    try {
      db.commit();
    } catch (SQLException e) {
      System.err.printf("J: Kafka committed the outputs and offsets %s but PostgreSQL's COMMIT failed: the database "
          + "effects of these %d records are lost (see the header of BenchLedger.java)%n", offsets, payments.size());
      throw e;
    }
    if (TRACE) {
      System.err.printf("J: poll of %d records (%d partitions): decode+SQL %.1f ms, Kafka transaction %.1f ms, PG commit %.1f ms%n",
          payments.size(), offsets.size(), (t1 - t0) / 1e6, (t2 - t1) / 1e6, (System.nanoTime() - t2) / 1e6);
    }
    return outcomes.size();
  }

  /** The PostgreSQL side: prepared once, run in the caller's transaction. */
  private static final class Ledger {
    private final Connection db;
    private final PreparedStatement claim;
    private final PreparedStatement known;
    private final PreparedStatement lockAccounts;
    private final PreparedStatement insertLedger;
    private final PreparedStatement updateBalances;

    Ledger(Connection db) throws SQLException {
      this.db = db;
      claim = db.prepareStatement(
          "INSERT INTO inbox (message_id) SELECT unnest(?::bytea[]) ON CONFLICT DO NOTHING RETURNING message_id");
      known = db.prepareStatement("SELECT payment_id FROM ledger WHERE payment_id = ANY(?::text[])");
      lockAccounts = db.prepareStatement(
          "INSERT INTO accounts (account_id, balance_cents) SELECT id, 0 FROM unnest(?::text[]) AS t(id) ORDER BY id "
              + "ON CONFLICT (account_id) DO UPDATE SET balance_cents = accounts.balance_cents "
              + "RETURNING account_id, balance_cents");
      insertLedger = db.prepareStatement(
          "INSERT INTO ledger (payment_id, account_id, amount_cents, status, balance_after_cents) "
              + "SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::bigint[])");
      updateBalances = db.prepareStatement(
          "UPDATE accounts AS a SET balance_cents = u.balance_cents "
              + "FROM unnest(?::text[], ?::bigint[]) AS u(account_id, balance_cents) WHERE a.account_id = u.account_id");
    }

    /** Claims, filters, locks, folds and writes; returns the outcomes in record order (nothing committed). */
    List<Outcome> apply(List<Payment> payments) throws SQLException {
      // a. the inbox claim: the ids this transaction inserted
      byte[][] messageIds = new byte[payments.size()][];
      for (int i = 0; i < messageIds.length; i++) messageIds[i] = payments.get(i).messageId();
      Set<ByteBuffer> claimed = new HashSet<>(); // ByteBuffer: equality by content
      claim.setArray(1, db.createArrayOf("bytea", messageIds));
      try (ResultSet rs = claim.executeQuery()) {
        while (rs.next()) claimed.add(ByteBuffer.wrap(rs.getBytes(1)));
      }
      List<Payment> fresh = new ArrayList<>(claimed.size());
      for (Payment p : payments) if (claimed.remove(ByteBuffer.wrap(p.messageId()))) fresh.add(p); // first occurrence only
      if (fresh.isEmpty()) return List.of();

      // b. payments already in the ledger (or twice in this poll) are not applied again
      String[] paymentIds = new String[fresh.size()];
      for (int i = 0; i < paymentIds.length; i++) paymentIds[i] = fresh.get(i).paymentId();
      Set<String> seen = new HashSet<>();
      known.setArray(1, texts(paymentIds));
      try (ResultSet rs = known.executeQuery()) {
        while (rs.next()) seen.add(rs.getString(1));
      }
      List<Payment> toApply = new ArrayList<>(fresh.size());
      for (Payment p : fresh) if (seen.add(p.paymentId())) toApply.add(p);
      if (toApply.isEmpty()) return List.of();

      // c. create and lock the poll's accounts, in account order, in one statement
      TreeSet<String> accountIds = new TreeSet<>();
      for (Payment p : toApply) accountIds.add(p.accountId());
      Map<String, Long> balances = new HashMap<>(accountIds.size() * 2);
      lockAccounts.setArray(1, texts(accountIds.toArray(new String[0])));
      try (ResultSet rs = lockAccounts.executeQuery()) {
        while (rs.next()) balances.put(rs.getString(1), rs.getLong(2));
      }

      // d. the ledger rule, folded in record order
      int n = toApply.size();
      List<Outcome> outcomes = new ArrayList<>(n);
      String[] ids = new String[n];
      String[] accounts = new String[n];
      Long[] amounts = new Long[n];
      String[] statuses = new String[n];
      Long[] after = new Long[n];
      Set<String> changed = new HashSet<>();
      for (int i = 0; i < n; i++) {
        Payment p = toApply.get(i);
        long balance = balances.get(p.accountId());
        long candidate = Math.addExact(balance, p.amountCents());
        boolean accepted = candidate >= 0;
        if (accepted) {
          balance = candidate;
          balances.put(p.accountId(), balance);
          changed.add(p.accountId());
        }
        String status = accepted ? ACCEPTED : REJECTED;
        outcomes.add(new Outcome(p, status, balance));
        ids[i] = p.paymentId();
        accounts[i] = p.accountId();
        amounts[i] = p.amountCents();
        statuses[i] = status;
        after[i] = balance;
      }

      // e. every ledger row in one statement, every changed balance in another
      insertLedger.setArray(1, texts(ids));
      insertLedger.setArray(2, texts(accounts));
      insertLedger.setArray(3, bigints(amounts));
      insertLedger.setArray(4, texts(statuses));
      insertLedger.setArray(5, bigints(after));
      insertLedger.executeUpdate();
      if (!changed.isEmpty()) {
        String[] changedIds = changed.toArray(new String[0]);
        Long[] changedBalances = new Long[changedIds.length];
        for (int i = 0; i < changedIds.length; i++) changedBalances[i] = balances.get(changedIds[i]);
        updateBalances.setArray(1, texts(changedIds));
        updateBalances.setArray(2, bigints(changedBalances));
        updateBalances.executeUpdate();
      }
      return outcomes;
    }

    private Array texts(String[] values) throws SQLException {
      return db.createArrayOf("text", values);
    }

    private Array bigints(Long[] values) throws SQLException {
      return db.createArrayOf("int8", values);
    }
  }

  // --- decoding -------------------------------------------------------------------------------------------------

  private static Payment decode(ConsumerRecord<byte[], byte[]> r) {
    Header header = r.headers().lastHeader("message-id");
    byte[] messageId = header != null && header.value() != null && header.value().length > 0
        ? header.value()
        : (r.topic() + "/" + r.partition() + "/" + r.offset()).getBytes(StandardCharsets.UTF_8);
    byte[] v = r.value();
    if (v == null || v.length < 10 || (v[0] & 0xff) != 0xC3 || (v[1] & 0xff) != 0x01) {
      throw new IllegalArgumentException("not Avro single-object encoding at " + r.topic() + "/" + r.partition() + "/" + r.offset());
    }
    try {
      AvroReader in = new AvroReader(v, 10); // C3 01 + the 8-byte fingerprint
      String paymentId = in.string();
      String accountId = in.string();
      long amountCents = in.readLong();
      in.string(); // requestedAt: not part of the rule
      return new Payment(messageId, paymentId, accountId, amountCents);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("undecodable PaymentRequested at " + r.topic() + "/" + r.partition() + "/" + r.offset(), e);
    }
  }

  /** Avro binary: a long is a zigzag varint, a string a long length then UTF-8 bytes. */
  private static final class AvroReader {
    private final byte[] buf;
    private int pos;

    AvroReader(byte[] buf, int pos) {
      this.buf = buf;
      this.pos = pos;
    }

    long readLong() {
      long raw = 0;
      int shift = 0;
      int b;
      do {
        if (shift > 63) throw new IllegalArgumentException("varint too long");
        b = buf[pos++] & 0xff;
        raw |= (long) (b & 0x7f) << shift;
        shift += 7;
      } while ((b & 0x80) != 0);
      return (raw >>> 1) ^ -(raw & 1);
    }

    String string() {
      long length = readLong();
      if (length < 0 || length > buf.length - pos) throw new IllegalArgumentException("bad string length " + length);
      String s = new String(buf, pos, (int) length, StandardCharsets.UTF_8);
      pos += (int) length;
      return s;
    }
  }

  // --- output ---------------------------------------------------------------------------------------------------

  private static byte[] json(Outcome o) {
    StringBuilder sb = new StringBuilder(160);
    sb.append("{\"paymentId\":");
    quote(sb, o.payment().paymentId());
    sb.append(",\"accountId\":");
    quote(sb, o.payment().accountId());
    sb.append(",\"amountCents\":").append(o.payment().amountCents());
    sb.append(",\"status\":\"").append(o.status());
    sb.append("\",\"balanceAfterCents\":").append(o.balanceAfterCents()).append('}');
    return sb.toString().getBytes(StandardCharsets.UTF_8);
  }

  private static void quote(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') sb.append('\\').append(c);
      else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
      else sb.append(c);
    }
    sb.append('"');
  }

  // --- set-up ---------------------------------------------------------------------------------------------------

  private static Properties consumerConfig(String brokers, String group) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, "bench-j");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "1000");
    p.put(ConsumerConfig.FETCH_MIN_BYTES_CONFIG, "1");
    p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(1 << 20));
    p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(16 << 20));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    return p;
  }

  private static Properties producerConfig(String brokers, String group) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    p.put(ProducerConfig.CLIENT_ID_CONFIG, "bench-j");
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, group + ".txn");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(64 << 10));
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    return p;
  }

  /** postgres://user[:password]@host[:port]/db[?params] -> a pgjdbc connection. */
  private static Connection connect(String databaseUrl) throws Exception {
    URI u = new URI(databaseUrl);
    if (!"postgres".equals(u.getScheme()) && !"postgresql".equals(u.getScheme())) {
      throw new IllegalArgumentException("DATABASE_URL must be postgres://...: " + databaseUrl);
    }
    String host = u.getHost() != null ? u.getHost() : "127.0.0.1";
    int port = u.getPort() > 0 ? u.getPort() : 5432;
    String database = u.getPath() == null || u.getPath().length() <= 1 ? "postgres" : u.getPath().substring(1);
    String jdbc = "jdbc:postgresql://" + host + ":" + port + "/" + database + (u.getRawQuery() != null ? "?" + u.getRawQuery() : "");
    Properties props = new Properties();
    String userInfo = u.getRawUserInfo();
    if (userInfo != null) {
      int colon = userInfo.indexOf(':');
      props.setProperty("user", percentDecode(colon >= 0 ? userInfo.substring(0, colon) : userInfo));
      if (colon >= 0) props.setProperty("password", percentDecode(userInfo.substring(colon + 1)));
    }
    props.setProperty("ApplicationName", "bench-j");
    return DriverManager.getConnection(jdbc, props);
  }

  /** %XX escapes only ('+' is a plus in a URL's user info, not a space). */
  private static String percentDecode(String s) {
    return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
  }

  private static void createTables(Connection db) throws SQLException {
    try (Statement s = db.createStatement()) {
      s.execute("CREATE TABLE IF NOT EXISTS inbox (message_id bytea PRIMARY KEY)");
      s.execute("CREATE TABLE IF NOT EXISTS accounts (account_id text PRIMARY KEY, balance_cents bigint NOT NULL)");
      s.execute("CREATE TABLE IF NOT EXISTS ledger (payment_id text PRIMARY KEY, account_id text NOT NULL, "
          + "amount_cents bigint NOT NULL, status text NOT NULL, balance_after_cents bigint NOT NULL)");
    }
  }

  private static String need(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) {
      System.err.println("J: " + name + " is required (bench/bench.js sets it)");
      System.exit(2);
    }
    return value;
  }
}
