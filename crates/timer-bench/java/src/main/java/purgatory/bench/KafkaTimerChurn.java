package purgatory.bench;

import java.lang.management.ManagementFactory;

import org.apache.kafka.server.util.timer.SystemTimer;
import org.apache.kafka.server.util.timer.TimerTask;

/**
 * The churn workload of {@code timer-bench} against Kafka's {@code SystemTimer}, used as
 * published in {@code kafka-server-common}: P timers pending (delays uniform in
 * [1, 30000) ms), then M times cancel one (a uniformly random one, or the oldest) and add
 * one of 30000 ms. Same generator (SplitMix64), same seed, same sequence as the Rust side.
 *
 * <p>The JIT needs a warm-up the Rust side does not: the churn is run once untimed on the
 * filled timer, then once timed. Prints one line,
 * {@code ns_per_op=X cpu_ns_per_op=Y thread_cpu_ns_per_op=Z}: wall time; the whole
 * process's CPU time (the garbage collector's threads collect what the churn allocates,
 * so they are part of its cost; the Rust side is one thread, whose CPU time is its
 * process's); and the measuring thread's alone, without the collector.
 *
 * <p>Usage: {@code KafkaTimerChurn PENDING OPS random|fifo SEED}
 */
public final class KafkaTimerChurn {
    /** A task that does nothing: only adding and cancelling are measured. */
    static final class Noop extends TimerTask {
        Noop(long delayMs) {
            super(delayMs);
        }

        @Override
        public void run() {}
    }

    /** SplitMix64, as crates/timer-bench/src/rng.rs. */
    static final class SplitMix {
        private long state;

        SplitMix(long seed) {
            state = seed;
        }

        long next() {
            state += 0x9e3779b97f4a7c15L;
            long z = state;
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }

        /** Uniform in 0..n: the high 64 bits of the unsigned 128-bit product. */
        long below(long n) {
            long x = next();
            return Math.multiplyHigh(x, n) + ((x >> 63) & n) + ((n >> 63) & x);
        }

        long range(long lo, long hi) {
            return lo + below(hi - lo);
        }
    }

    private KafkaTimerChurn() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: KafkaTimerChurn PENDING OPS random|fifo SEED");
            System.exit(2);
        }
        int pending = Integer.parseInt(args[0]);
        long ops = Long.parseLong(args[1]);
        boolean random = switch (args[2]) {
            case "random" -> true;
            case "fifo" -> false;
            default -> throw new IllegalArgumentException("cancel must be random or fifo");
        };
        long seed = Long.parseLong(args[3]);

        SplitMix rng = new SplitMix(seed);
        SystemTimer timer = new SystemTimer("churn");
        TimerTask[] tasks = new TimerTask[pending];
        for (int i = 0; i < pending; i++) {
            tasks[i] = new Noop(rng.range(1, 30_000));
            timer.add(tasks[i]);
        }
        int[] oldest = {0};
        churn(timer, tasks, rng, ops, random, oldest);

        com.sun.management.OperatingSystemMXBean bean =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        java.lang.management.ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long cpuStart = bean.getProcessCpuTime();
        long threadStart = threads.getCurrentThreadCpuTime();
        long start = System.nanoTime();
        churn(timer, tasks, rng, ops, random, oldest);
        long elapsed = System.nanoTime() - start;
        long cpu = bean.getProcessCpuTime() - cpuStart;
        long thread = threads.getCurrentThreadCpuTime() - threadStart;
        if (timer.size() != pending) {
            throw new IllegalStateException("pending " + timer.size() + ", expected " + pending);
        }
        System.out.printf(
                "ns_per_op=%.2f cpu_ns_per_op=%.2f thread_cpu_ns_per_op=%.2f%n",
                (double) elapsed / ops, (double) cpu / ops, (double) thread / ops);
        timer.close();
    }

    private static void churn(SystemTimer timer, TimerTask[] tasks, SplitMix rng, long ops, boolean random, int[] oldest) {
        int pending = tasks.length;
        for (long n = 0; n < ops; n++) {
            int i;
            if (random) {
                i = (int) rng.below(pending);
            } else {
                i = oldest[0];
                oldest[0] = i + 1 == pending ? 0 : i + 1;
            }
            tasks[i].cancel();
            tasks[i] = new Noop(30_000);
            timer.add(tasks[i]);
        }
    }
}
