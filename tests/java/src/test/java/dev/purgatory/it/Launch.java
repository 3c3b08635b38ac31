package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * How {@link PurgatoryBroker} and FailoverClientTest's cluster start the purgatory binary,
 * as tests/python/conftest.py's launch(): every listener on a port the kernel picks (the
 * caller's {@code --listen 127.0.0.1:0}, and {@code --admin-listen 127.0.0.1:0} added here),
 * and the addresses bound read from the file {@code --ready-file} names, which the broker
 * writes once every listener serves. A port the kernel hands out as the broker binds it
 * cannot be taken by another process in between, as a port found free beforehand could.
 */
final class Launch {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Numbers the servers this JVM starts: with its pid, what names their logs. */
    private static final AtomicInteger LAUNCHED = new AtomicInteger();

    private Launch() {
    }

    /**
     * A running {@code purgatory serve}, its output in {@code log}, and what its ready file
     * said: {@code bootstrap} (the advertised addresses, joined by commas), {@code admin}
     * ({@code http://host:port} of the admin API) and {@code listeners} (broker id to the
     * host:port its Kafka listener is bound to, in broker order).
     */
    record Server(Process process, Path log, String bootstrap, String admin, Map<Integer, String> listeners) {
    }

    /**
     * Starts {@code purgatory serve args...} in the repository root, its output in
     * {@code <repo>/target/java-WHAT-PID-N.log}, and waits up to 30 s for its ready file. An
     * error naming the log if it exits first or writes none in time (it is stopped then).
     */
    static Server start(String what, List<String> args) throws IOException, InterruptedException {
        Path bin = PurgatoryBroker.binary();
        Path root = PurgatoryBroker.repoRoot();
        String name = "java-" + what + "-" + ProcessHandle.current().pid() + "-" + LAUNCHED.incrementAndGet();
        Path log = root.resolve("target/" + name + ".log");
        Path readyFile = root.resolve("target/" + name + ".ready.json");
        Files.createDirectories(log.getParent());
        List<String> command = new ArrayList<>();
        command.add(bin.toString());
        command.add("serve");
        command.addAll(args);
        command.addAll(List.of("--admin-listen", "127.0.0.1:0", "--ready-file", readyFile.toString()));
        Process process = new ProcessBuilder(command)
                .directory(root.toFile())
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        try {
            JsonNode ready = awaitReady(what, process, log, readyFile);
            if (!ready.path("admin").isTextual() || ready.path("brokers").isEmpty()) {
                throw new IllegalStateException(what + "'s ready file names no admin API or no broker: " + ready);
            }
            Map<Integer, String> listeners = new LinkedHashMap<>();
            for (JsonNode broker : ready.path("brokers")) {
                listeners.put(broker.path("id").asInt(), broker.path("listener").asText());
            }
            return new Server(process, log, ready.path("bootstrap").asText(), "http://" + ready.path("admin").asText(),
                    Collections.unmodifiableMap(listeners));
        } catch (IOException | InterruptedException | RuntimeException e) {
            stop(process);
            throw e;
        }
    }

    /** The ready file's JSON, once it is there (it is renamed into place whole). */
    private static JsonNode awaitReady(String what, Process process, Path log, Path readyFile)
            throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!Files.exists(readyFile)) {
            if (!process.isAlive()) {
                throw new IllegalStateException(what + " exited with " + process.exitValue()
                        + " before writing its ready file; see " + log + ":\n"
                        + Files.readString(log, StandardCharsets.UTF_8));
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(what + " wrote no ready file within 30 s; see " + log);
            }
            Thread.sleep(20);
        }
        JsonNode ready = JSON.readTree(readyFile.toFile());
        Files.delete(readyFile);
        return ready;
    }

    /** SIGTERM, then SIGKILL if it has not stopped within 10 s. */
    static void stop(Process process) throws InterruptedException {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
    }
}
