package dev.purgatory.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs one of Kafka's command-line tools (org.apache.kafka.tools.*) as its own `java`
 * process, as Kafka's system tests do: the tools call System.exit. The classpath is the test
 * classpath that maven-dependency-plugin wrote to target/test-classpath.txt. Stdout and
 * stderr go to files under tests/java/target/tools/, kept for a failed run.
 */
public final class KafkaTool {
    private static final ObjectMapper JSON = new ObjectMapper();

    private KafkaTool() {
    }

    /** A finished tool run: its exit code, its stdout lines, where its output is. */
    public record Result(int exitCode, List<String> stdout, Path stdoutFile, Path stderrFile) {
        /** Every stdout line that is a JSON object (the Verifiable* tools' events). */
        public List<JsonNode> events() throws IOException {
            List<JsonNode> events = new ArrayList<>();
            for (String line : stdout) {
                if (line.startsWith("{")) {
                    events.add(JSON.readTree(line));
                }
            }
            return events;
        }

        /** The events of one name ("producer_send_success", "records_consumed", ...). */
        public List<JsonNode> events(String name) throws IOException {
            List<JsonNode> named = new ArrayList<>();
            for (JsonNode event : events()) {
                if (name.equals(event.path("name").asText())) {
                    named.add(event);
                }
            }
            return named;
        }

        public String describe() {
            String err;
            try {
                err = Files.readString(stderrFile, StandardCharsets.UTF_8);
            } catch (IOException e) {
                err = "(unreadable: " + e + ")";
            }
            if (err.length() > 4000) {
                err = "..." + err.substring(err.length() - 4000);
            }
            return "exit " + exitCode + ", stdout in " + stdoutFile + ", stderr (tail):\n" + err;
        }
    }

    /** A started tool process; {@link #await} waits for it to exit by itself. */
    public static final class Running {
        private final Process process;
        private final Path stdout;
        private final Path stderr;

        Running(Process process, Path stdout, Path stderr) {
            this.process = process;
            this.stdout = stdout;
            this.stderr = stderr;
        }

        /** The JSON events printed so far (complete lines only), for a tool that is still running. */
        public List<JsonNode> eventsSoFar() throws IOException {
            String text = Files.readString(stdout, StandardCharsets.UTF_8);
            int end = text.lastIndexOf('\n');
            List<JsonNode> events = new ArrayList<>();
            if (end < 0) {
                return events;
            }
            for (String line : text.substring(0, end).split("\n")) {
                if (line.startsWith("{")) {
                    events.add(JSON.readTree(line));
                }
            }
            return events;
        }

        public boolean isAlive() {
            return process.isAlive();
        }

        /** SIGTERM, as Kafka's system tests stop a tool: its shutdown hook closes the client. */
        public void terminate() {
            process.destroy();
        }

        /** Kills the tool if it still runs (cleanup after a failed test). */
        public void kill() throws InterruptedException {
            if (process.isAlive()) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }

        /** Waits (generously) for the tool to exit on its own; kills it and fails if it does not. */
        public Result await(long timeoutSeconds) throws IOException, InterruptedException {
            if (!process.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                throw new AssertionError("tool did not exit within " + timeoutSeconds + " s; stdout in " + stdout
                        + ", stderr in " + stderr);
            }
            return new Result(process.exitValue(), Files.readAllLines(stdout, StandardCharsets.UTF_8), stdout, stderr);
        }
    }

    public static Running start(String name, String mainClass, List<String> args) throws IOException {
        Path dir = Paths.get("target", "tools").toAbsolutePath();
        Files.createDirectories(dir);
        Path stdout = dir.resolve(name + ".out");
        Path stderr = dir.resolve(name + ".err");
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        // Small heaps and quick start-up: the machine has two cores shared with the broker.
        command.addAll(List.of("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp", classpath(), mainClass));
        command.addAll(args);
        Process process = new ProcessBuilder(command)
                .redirectOutput(stdout.toFile())
                .redirectError(stderr.toFile())
                .start();
        return new Running(process, stdout, stderr);
    }

    public static Result run(String name, String mainClass, List<String> args, long timeoutSeconds)
            throws IOException, InterruptedException {
        return start(name, mainClass, args).await(timeoutSeconds);
    }

    private static String classpath() throws IOException {
        String file = System.getProperty("tools.classpath.file", "target/test-classpath.txt");
        Path path = Path.of(file);
        if (!Files.isRegularFile(path)) {
            throw new IllegalStateException(path.toAbsolutePath() + " is missing: run the tests through Maven"
                    + " (maven-dependency-plugin writes it in generate-test-resources)");
        }
        String cp = Files.readString(path, StandardCharsets.UTF_8).trim();
        if (cp.isEmpty()) {
            throw new IllegalStateException(path.toAbsolutePath() + " is empty");
        }
        return cp;
    }
}
