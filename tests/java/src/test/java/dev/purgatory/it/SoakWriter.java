package dev.purgatory.it;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.Semaphore;

/*
 * The Java client's writer in tests/python/test_fault_soak.py (issue 20, point 4: producers
 * from confluent-kafka and the Java client). Run as its own `java` process by that test:
 *
 *     java -cp <test classpath> dev.purgatory.it.SoakWriter BOOTSTRAP TOPIC NAME PARTITIONS
 *
 * An idempotent acks=all KafkaProducer sends `NAME-<seq>` round robin to explicit
 * partitions until its stdin closes, then drains and exits 0. It prints one line per event,
 * which the test parses:
 *
 *     SENT <value> <partition>            handed to send(), in send order
 *     ACK <value> <partition> <offset>    acknowledged at that offset
 *     FAIL <value> <exception: message>   told it failed (indeterminate for the test)
 *     FATAL <exception: message>          the writer stopped early (then it exits 1)
 */
public final class SoakWriter {
    // A bound on records sent but not answered: room for several batches in flight over the
    // partitions (what idempotent retries are about), yet a pace within a few times that of
    // the confluent-kafka writers beside it (with 1000 it wrote some 60 times as many).
    private static final int OUTSTANDING = 20;

    // Callbacks print from the producer's I/O thread, the loop from main: PrintStream's
    // println is synchronized, and autoflush hands every line to the test as it happens.
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    private SoakWriter() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: SoakWriter BOOTSTRAP TOPIC NAME PARTITIONS");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        String name = args[2];
        int partitions = Integer.parseInt(args[3]);

        Thread stdinWatch = new Thread(SoakWriter::awaitStdinClosed, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();

        int status = 0;
        try (KafkaProducer<String, String> producer = producer(bootstrap, name)) {
            write(producer, topic, name, partitions, stdinWatch);
            producer.flush();
        } catch (Exception e) {
            OUT.println("FATAL " + describe(e));
            status = 1;
        }
        OUT.flush();
        System.exit(status);
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String name) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, name);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, 2);
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 50);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120000);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    /** Sends until {@code stdinWatch} has seen stdin close. */
    private static void write(KafkaProducer<String, String> producer, String topic, String name, int partitions,
            Thread stdinWatch) throws InterruptedException {
        Semaphore outstanding = new Semaphore(OUTSTANDING);
        for (long seq = 0; stdinWatch.isAlive(); seq++) {
            int partition = (int) (seq % partitions);
            String value = name + "-" + seq;
            outstanding.acquire();
            OUT.println("SENT " + value + " " + partition);
            // A send that fails before it reaches the network (metadata wait timed out, say)
            // is answered through the callback too, so every SENT gets an ACK or a FAIL.
            producer.send(new ProducerRecord<>(topic, partition, null, value), (metadata, error) -> {
                if (error == null) {
                    OUT.println("ACK " + value + " " + metadata.partition() + " " + metadata.offset());
                } else {
                    OUT.println("FAIL " + value + " " + describe(error));
                }
                outstanding.release();
            });
        }
    }

    /** Returns once stdin is closed (the test's way to say stop), or unreadable. */
    private static void awaitStdinClosed() {
        try {
            while (System.in.read() != -1) {
                // anything written is ignored: only the close counts
            }
        } catch (IOException closed) {
            // the same as a close
        }
    }

    /** One line: the exception's class and message, newlines folded. */
    private static String describe(Throwable e) {
        return (e.getClass().getName() + ": " + e.getMessage()).replace('\n', ' ');
    }
}
