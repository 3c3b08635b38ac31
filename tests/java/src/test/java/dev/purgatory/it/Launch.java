package dev.purgatory.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * How {@link PurgatoryBroker} and FailoverClientTest's cluster start the purgatory binary,
 * as tests/python/conftest.py's launch(). A port found free can be taken before the broker
 * binds it (the kernel hands the same range to outgoing connections), so a start that stops
 * on "Address already in use" is tried again on other ports.
 */
final class Launch {
    private static final int ATTEMPTS = 5;

    private Launch() {
    }

    /** One start on ports of its own: the server, or null if one of them was taken. */
    @FunctionalInterface
    interface Attempt<T> {
        T start() throws IOException, InterruptedException;
    }

    /** Throws IOException until the server answers. */
    @FunctionalInterface
    interface Ready<T> {
        void check(T server) throws IOException, InterruptedException;
    }

    /** Runs {@code attempt} until one is not refused a port; {@code refused} says what failed if all are. */
    static <T> T retrying(String refused, Attempt<T> attempt) throws IOException, InterruptedException {
        for (int i = 1; i <= ATTEMPTS; i++) {
            T server = attempt.start();
            if (server != null) {
                return server;
            }
        }
        throw new IllegalStateException(refused + " " + ATTEMPTS + " times");
    }

    /**
     * Starts {@code command} in the repository root with its output in {@code log}, wraps it,
     * and waits up to 30 s for {@code ready} to pass on it ({@code what} answering
     * {@code call}). Null if it stopped because a port was taken; an error if it stopped for
     * another reason or never answered.
     */
    static <T> T await(String what, String call, List<String> command, Path log, Function<Process, T> wrap,
            Ready<T> ready) throws IOException, InterruptedException {
        Files.createDirectories(log.getParent());
        Process process = new ProcessBuilder(command)
                .directory(PurgatoryBroker.repoRoot().toFile())
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        T server = wrap.apply(process);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            try {
                ready.check(server);
                return server;
            } catch (IOException notYet) {
                if (!process.isAlive()) {
                    String output = Files.readString(log, StandardCharsets.UTF_8);
                    if (output.contains("Address already in use")) {
                        return null;
                    }
                    throw new IllegalStateException(what + " exited with " + process.exitValue() + "; see " + log
                            + ":\n" + output);
                }
                Thread.sleep(50);
            }
        }
        stop(process);
        throw new IllegalStateException(what + " did not answer " + call + " within 30 s; see " + log);
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
