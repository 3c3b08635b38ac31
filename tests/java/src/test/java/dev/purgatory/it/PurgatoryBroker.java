package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The real {@code purgatory} binary on loopback ports the kernel picks, one per test class
 * (as tests/python/conftest.py does): its Kafka listener, its admin API, and its two
 * embedded followers (replica ids 2 and 3) replicating over the wire. The ports are read
 * from its ready file ({@link Launch}). Its output goes to
 * {@code <repo>/target/java-broker-PID-N.log}.
 */
public final class PurgatoryBroker implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(5))
            .build();

    private final Process process;
    private final String bootstrap;
    private final String admin;
    private final Path log;

    private PurgatoryBroker(Launch.Server server) {
        this.process = server.process();
        this.bootstrap = server.bootstrap();
        this.admin = server.admin();
        this.log = server.log();
    }

    /** The repository root (the pom passes it; from tests/java it is two levels up). */
    public static Path repoRoot() {
        String root = System.getProperty("purgatory.root");
        Path path = root != null ? Path.of(root) : Path.of(System.getProperty("user.dir"), "..", "..");
        return path.toAbsolutePath().normalize();
    }

    /**
     * The broker binary: $PURGATORY_BIN, else target/release/purgatory. Another process may
     * still be building it, so this waits for it to appear rather than building it.
     */
    static Path binary() throws InterruptedException {
        String env = System.getenv("PURGATORY_BIN");
        Path bin = env != null && !env.isEmpty()
                ? Path.of(env).toAbsolutePath()
                : repoRoot().resolve("target/release/purgatory");
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(20);
        boolean told = false;
        while (!Files.isExecutable(bin)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the broker binary " + bin + " did not appear within 20 minutes"
                        + " (build it with `cargo build --release`, or set PURGATORY_BIN)");
            }
            if (!told) {
                System.err.println("waiting for " + bin + " to be built...");
                told = true;
            }
            Thread.sleep(2000);
        }
        return bin;
    }

    /** Starts a broker on ports the kernel picks; it answers once this returns. */
    public static PurgatoryBroker start() throws IOException, InterruptedException {
        return start(repoRoot().resolve("config/broker.toml"), List.of());
    }

    /** The same with another config file and more {@code serve} flags (e.g. --clock manual). */
    public static PurgatoryBroker start(Path config, List<String> extra) throws IOException, InterruptedException {
        List<String> args = new java.util.ArrayList<>(List.of("--config", config.toString(), "--listen", "127.0.0.1:0"));
        args.addAll(extra);
        return new PurgatoryBroker(Launch.start("broker", args));
    }

    /** POST /api/clock/advance: moves a manual clock on by {@code ms}. */
    public JsonNode advanceClock(long ms) throws IOException, InterruptedException {
        return call(HttpRequest.newBuilder(admin("/api/clock/advance?ms=" + ms))
                .POST(HttpRequest.BodyPublishers.noBody()));
    }

    /** host:port of the Kafka listener, for bootstrap.servers. */
    public String bootstrap() {
        return bootstrap;
    }

    public Path log() {
        return log;
    }

    /** GET /api/state: partitions (hw, leo, isr), groups, purgatories. */
    public JsonNode state() throws IOException, InterruptedException {
        return call(HttpRequest.newBuilder(admin("/api/state")).GET());
    }

    /** POST /api/followers/{id}/{action}: pause, resume, crash, restart. */
    public JsonNode follower(int replicaId, String action) throws IOException, InterruptedException {
        return call(HttpRequest.newBuilder(admin("/api/followers/" + replicaId + "/" + action))
                .POST(HttpRequest.BodyPublishers.noBody()));
    }

    /** The partition's entry in /api/state, or null if the broker has no such partition. */
    public JsonNode partition(String topic, int partition) throws IOException, InterruptedException {
        for (JsonNode p : state().path("partitions")) {
            if (p.path("topic").asText().equals(topic) && p.path("partition").asInt() == partition) {
                return p;
            }
        }
        return null;
    }

    private URI admin(String path) {
        return URI.create(admin + path);
    }

    private static JsonNode call(HttpRequest.Builder request) throws IOException, InterruptedException {
        HttpResponse<String> response = HTTP.send(request.timeout(Duration.ofSeconds(5)).build(),
                HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() != 200) {
            throw new IOException(request.build().uri() + " answered " + response.statusCode() + ": "
                    + response.body());
        }
        return JSON.readTree(response.body());
    }

    /** SIGTERM, then SIGKILL if it has not stopped within 10 s. */
    @Override
    public void close() throws InterruptedException {
        Launch.stop(process);
    }
}
