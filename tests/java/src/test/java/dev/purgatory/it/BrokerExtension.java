package dev.purgatory.it;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * A {@link PurgatoryBroker} of a test class's own and an {@link Admin} client on it. A test
 * class registers it in a static field, naming the topics its tests expect to exist:
 *
 * <pre>{@code
 * @RegisterExtension
 * static final BrokerExtension cluster = new BrokerExtension(new NewTopic("orders", 4, (short) 3));
 * }</pre>
 *
 * Before the class's first test it starts the broker, opens the Admin and creates those
 * topics; after the class's last test it closes both. One broker per class means topics,
 * groups and paused followers left behind by one class never reach another.
 *
 * <p>With {@code PURGATORY_EXTERNAL_BOOTSTRAP} set (e.g. to scripts/kafka-reference.sh's
 * {@code 127.0.0.1:29091}) no broker is started: the Admin and {@link #bootstrap()} point at
 * that cluster instead, to check a test's expectations against real Kafka. Only tests that
 * use {@link #bootstrap()} and {@link #admin()} (not {@link #broker()}) can run that way, and
 * they must pick topic and group names that a previous run has not left behind.
 */
public final class BrokerExtension implements BeforeAllCallback, AfterAllCallback {
    /** The environment variable naming an external cluster's bootstrap servers. */
    public static final String EXTERNAL_BOOTSTRAP = "PURGATORY_EXTERNAL_BOOTSTRAP";

    private final List<NewTopic> topics;
    private PurgatoryBroker broker;
    private String bootstrap;
    private Admin admin;

    /** {@code topics}: created (and waited for) before the first test; none is fine. */
    public BrokerExtension(NewTopic... topics) {
        this.topics = List.of(topics);
    }

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        String external = externalBootstrap();
        if (external != null) {
            bootstrap = external;
            admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, external,
                    AdminClientConfig.CLIENT_ID_CONFIG, "java-admin"));
        } else {
            broker = PurgatoryBroker.start();
            bootstrap = broker.bootstrap();
            admin = Clients.admin(broker);
        }
        if (!topics.isEmpty()) {
            admin.createTopics(topics).all().get();
        }
    }

    /** Runs even when {@link #beforeAll} failed part-way, so it closes only what was opened. */
    @Override
    public void afterAll(ExtensionContext context) throws Exception {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
            admin = null;
        }
        if (broker != null) {
            broker.close();
            broker = null;
        }
        bootstrap = null;
    }

    /** $PURGATORY_EXTERNAL_BOOTSTRAP, or null when the tests start a broker of their own. */
    public static String externalBootstrap() {
        String env = System.getenv(EXTERNAL_BOOTSTRAP);
        return env == null || env.isBlank() ? null : env.trim();
    }

    /** The running broker: its bootstrap address for clients and tools, and its admin API. */
    public PurgatoryBroker broker() {
        if (broker == null) {
            throw new IllegalStateException(bootstrap != null
                    ? "no broker of its own: " + EXTERNAL_BOOTSTRAP + " points the tests at " + bootstrap
                    : "no broker: it is started before the class's first test");
        }
        return broker;
    }

    /** Where clients and tools connect: the broker's listener, or the external cluster. */
    public String bootstrap() {
        if (bootstrap == null) {
            throw new IllegalStateException("no broker: it is started before the class's first test");
        }
        return bootstrap;
    }

    /** The Kafka Admin client connected to {@link #bootstrap()}. */
    public Admin admin() {
        if (admin == null) {
            throw new IllegalStateException("no admin client: it is opened before the class's first test");
        }
        return admin;
    }

    /**
     * The partition's latest offset as ListOffsets answers it: the high watermark, where a
     * consumer's reading ends (below the log end while the followers have not caught up).
     */
    public long latestOffset(TopicPartition tp) throws Exception {
        return admin().listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset();
    }
}
