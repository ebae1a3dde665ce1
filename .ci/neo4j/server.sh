#!/usr/bin/env bash
# Throwaway Neo4j Community (embedded, Bolt only) for the test suite; no Docker needed.
#
#   server.sh build    compile the launcher and fetch its jars (skipped when up to date)
#   server.sh start    start in the background, wait for readiness, print the bolt URI
#   server.sh stop     SIGTERM (SIGKILL after 60 s) and delete the data dir start created
#   server.sh status   exit 0 and print the URI when running, else exit 3
#
# Env: SKILLGROVE_NEO4J_PORT (7687), SKILLGROVE_NEO4J_RUN_DIR (<this dir>/run),
#      SKILLGROVE_NEO4J_DATA_DIR (kept on stop; default a fresh dir under the run dir).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORT="${SKILLGROVE_NEO4J_PORT:-7687}"
RUN_DIR="${SKILLGROVE_NEO4J_RUN_DIR:-$HERE/run}"
JAVA="${JAVA:-java}"
MAIN_CLASS="skillgrove.neo4j.Launcher"
READY_PREFIX="skillgrove-neo4j ready "
START_TIMEOUT=180
STOP_TIMEOUT=60

TARGET="$HERE/target"
CLASS_FILE="$TARGET/classes/skillgrove/neo4j/Launcher.class"
# Written only after a successful build; javac leaves an unchanged class file's mtime alone,
# so the class file itself cannot tell whether pom.xml changed since.
BUILD_STAMP="$TARGET/.skillgrove-built"
BUILD_LOG="$TARGET/build.log"
LOG="$RUN_DIR/neo4j.log"
PID_FILE="$RUN_DIR/neo4j.pid"
DATA_DIR_FILE="$RUN_DIR/data-dir"  # only written for a data dir this script created

die() { echo "server.sh: $*" >&2; exit 1; }

is_built() {
    [[ -f "$CLASS_FILE" && -f "$BUILD_STAMP" ]] || return 1
    compgen -G "$TARGET/lib/*.jar" >/dev/null || return 1
    [[ "$BUILD_STAMP" -nt "$HERE/pom.xml" ]] || return 1
    [[ "$BUILD_STAMP" -nt "$HERE/src/main/java/skillgrove/neo4j/Launcher.java" ]] || return 1
}

cmd_build() {
    if is_built; then
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found (needs Maven and a JDK 17+)"
    # Stale jars from an older neo4j.version would otherwise sit on the classpath.
    rm -rf "$TARGET/lib" "$BUILD_STAMP"
    mkdir -p "$TARGET"
    # Even with -q, Maven 3.8 prints stray ANSI codes; keep its output unless it fails.
    if ! (cd "$HERE" && mvn -q -B compile dependency:copy-dependencies \
        -DoutputDirectory=target/lib -DincludeScope=runtime) >"$BUILD_LOG" 2>&1; then
        cat "$BUILD_LOG" >&2
        die "build failed (log: $BUILD_LOG)"
    fi
    touch "$BUILD_STAMP"
}

# Prints the pid when our launcher is running; a pid reused by another program does not count.
running_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(cat "$PID_FILE")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$MAIN_CLASS" || return 1
    echo "$pid"
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

ready_uri() {
    { grep -m1 "^$READY_PREFIX" "$LOG" 2>/dev/null || true; } | sed "s/^$READY_PREFIX//"
}

# kill -0 alone would count a zombie (exited but not yet reaped) as alive.
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
    [[ -n "$state" && "$state" != Z ]]
}

fail_start() {
    echo "server.sh: $*" >&2
    echo "---- last lines of $LOG ----" >&2
    tail -n 60 "$LOG" >&2 || true
    cmd_stop >/dev/null 2>&1 || true
    exit 1
}

cmd_start() {
    local pid
    if pid="$(running_pid)"; then
        die "already running (pid $pid, $(ready_uri)); run '$0 stop' first"
    fi
    if port_in_use; then
        die "port $PORT on 127.0.0.1 is already in use by another process; stop it or set SKILLGROVE_NEO4J_PORT"
    fi
    cmd_build

    mkdir -p "$RUN_DIR"
    RUN_DIR="$(cd "$RUN_DIR" && pwd)"
    LOG="$RUN_DIR/neo4j.log" PID_FILE="$RUN_DIR/neo4j.pid" DATA_DIR_FILE="$RUN_DIR/data-dir"
    rm -f "$PID_FILE" "$DATA_DIR_FILE"

    local data_dir
    if [[ -n "${SKILLGROVE_NEO4J_DATA_DIR:-}" ]]; then
        data_dir="$SKILLGROVE_NEO4J_DATA_DIR"
    else
        data_dir="$(mktemp -d "$RUN_DIR/data.XXXXXX")"
        echo "$data_dir" >"$DATA_DIR_FILE"
    fi

    # Flags taken from Neo4j's own server.jvm.additional defaults (minus AlwaysPreTouch,
    # which would commit the whole heap up front).
    SKILLGROVE_NEO4J_PORT="$PORT" nohup "$JAVA" -Xmx768m -Xms256m \
        -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow -XX:+ExitOnOutOfMemoryError \
        -Djdk.nio.maxCachedBufferSize=1024 -Dio.netty.tryReflectionSetAccessible=true \
        -Dlog4j2.disable.jmx=true \
        --add-opens=java.base/java.nio=ALL-UNNAMED \
        --add-opens=java.base/java.io=ALL-UNNAMED \
        --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
        -cp "$TARGET/classes:$TARGET/lib/*" "$MAIN_CLASS" "$data_dir" \
        </dev/null >"$LOG" 2>&1 &
    pid=$!
    echo "$pid" >"$PID_FILE"

    local deadline=$((SECONDS + START_TIMEOUT)) uri
    while true; do
        uri="$(ready_uri)"
        if [[ -n "$uri" ]]; then
            echo "$uri"
            return 0
        fi
        alive "$pid" || fail_start "neo4j (pid $pid) exited before it was ready"
        ((SECONDS < deadline)) || fail_start "neo4j not ready after ${START_TIMEOUT}s"
        sleep 0.5
    done
}

cmd_stop() {
    local pid
    if pid="$(running_pid)"; then
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + STOP_TIMEOUT))
        while alive "$pid" && ((SECONDS < deadline)); do
            sleep 0.5
        done
        if alive "$pid"; then
            echo "server.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            while alive "$pid"; do sleep 0.2; done
        fi
        echo "stopped (pid $pid)"
    else
        echo "not running"
    fi
    rm -f "$PID_FILE"
    if [[ -f "$DATA_DIR_FILE" ]]; then
        rm -rf -- "$(cat "$DATA_DIR_FILE")"
        rm -f "$DATA_DIR_FILE"
    fi
}

cmd_status() {
    local pid
    if pid="$(running_pid)"; then
        echo "running (pid $pid) $(ready_uri)"
    else
        echo "not running"
        return 3
    fi
}

case "${1:-}" in
    build) cmd_build ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 {build|start|stop|status}" >&2; exit 2 ;;
esac
