package skillgrove.neo4j;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Stream;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.BoltConnectorInternalSettings;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;

/**
 * Starts an embedded Neo4j Community DBMS that speaks Bolt, for tests only.
 *
 * Usage: Launcher [dataDir]   (or env SKILLGROVE_NEO4J_DATA_DIR; else a fresh temp dir,
 * which is deleted again on shutdown). Port: env SKILLGROVE_NEO4J_PORT, default 7687.
 *
 * server.sh waits for the single "skillgrove-neo4j ready ..." line on stdout, so nothing
 * else may print that prefix.
 */
public final class Launcher {
    private static final String HOST = "127.0.0.1";
    private static final long READY_TIMEOUT_MS = 170_000;

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(env("SKILLGROVE_NEO4J_PORT", "7687"));

        String dirArg = args.length > 0 ? args[0] : System.getenv("SKILLGROVE_NEO4J_DATA_DIR");
        boolean ownsDir = dirArg == null || dirArg.isBlank();
        Path home = ownsDir ? Files.createTempDirectory("skillgrove-neo4j-") : Path.of(dirArg);
        Files.createDirectories(home);

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress(HOST, port))
                // Tests talk Bolt only; no point opening more ports that could clash.
                .setConfig(HttpConnector.enabled, false)
                .setConfig(HttpsConnector.enabled, false)
                .setConfig(GraphDatabaseSettings.auth_enabled, false)
                // Usage reporting would phone home to neo4j.com; only loopback traffic is allowed here.
                .setConfig(GraphDatabaseSettings.udc_enabled, false)
                // Default sizing assumes a dedicated machine; CI shares 2 cores / 24 GiB.
                .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(128))
                // Preallocating 256 MiB tx logs costs disk and startup time for no gain here.
                .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                .setConfig(GraphDatabaseSettings.logical_log_rotation_threshold, ByteUnit.mebiBytes(16))
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "false")
                // Each defaults to 5 s of idle waiting on every stop; a test server has nothing to drain.
                .setConfig(BoltConnectorInternalSettings.thread_pool_shutdown_wait_time, Duration.ofSeconds(1))
                .setConfig(BoltConnectorInternalSettings.connection_shutdown_wait_time, Duration.ofSeconds(1))
                .build();

        CountDownLatch stopped = new CountDownLatch(1);
        // SIGTERM from server.sh lands here; a clean shutdown flushes the store and frees the port.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                dbms.shutdown();
                if (ownsDir) {
                    deleteTree(home);
                }
                System.out.println("skillgrove-neo4j stopped");
                System.out.flush();
            } finally {
                stopped.countDown();
            }
        }, "skillgrove-neo4j-shutdown"));

        long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        GraphDatabaseService db = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
        if (!db.isAvailable(READY_TIMEOUT_MS)) {
            System.err.println("skillgrove-neo4j: database 'neo4j' did not become available");
            System.exit(1);
        }
        // build() returning does not by itself prove the Bolt socket is accepting yet.
        awaitListening(port, deadline);

        System.out.println("skillgrove-neo4j ready bolt://" + HOST + ":" + port);
        System.out.flush();

        // DBMS worker threads may all be daemons; keep the JVM up until the hook has run.
        stopped.await();
    }

    private static void awaitListening(int port, long deadline) throws InterruptedException {
        while (true) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(HOST, port), 1000);
                return;
            } catch (IOException e) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("skillgrove-neo4j: Bolt not listening on " + HOST + ":" + port + ": " + e);
                    System.exit(1);
                }
                Thread.sleep(100);
            }
        }
    }

    private static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isBlank() ? fallback : v;
    }

    private static void deleteTree(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        } catch (IOException | UncheckedIOException e) {
            System.err.println("skillgrove-neo4j: could not delete " + root + ": " + e);
        }
    }
}
