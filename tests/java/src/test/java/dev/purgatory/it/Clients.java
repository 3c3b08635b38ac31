package dev.purgatory.it;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.util.Map;
import java.util.Properties;

/** Real Kafka Java clients (kafka-clients 4.4) pointed at a {@link PurgatoryBroker}. */
public final class Clients {
    private Clients() {
    }

    public static Admin admin(PurgatoryBroker broker) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "java-admin");
        return Admin.create(props);
    }

    public static KafkaProducer<String, String> producer(PurgatoryBroker broker, Map<String, Object> overrides) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.putAll(overrides);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    /** A consumer of group {@code groupId} (null: no group, for assign + seek) that commits only when told. */
    public static KafkaConsumer<String, String> consumer(PurgatoryBroker broker, String groupId, String clientId) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        if (groupId != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        }
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10000);
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }
}
