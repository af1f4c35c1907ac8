#!/usr/bin/env bash
# Benchmark suite: builds the binaries, starts a private redis-server, the
# embedded Kafka broker (cmd/loadtest -kafka-embedded), logic, job and one to
# three comets on 127.0.0.1, runs the scenarios one after another with
# cmd/loadtest, stops everything it started, and rewrites the results section
# of BENCHMARKS.md.
#
#   scripts/bench.sh                      # all scenarios, full size
#   SCENARIOS="S1 J S4" scripts/bench.sh  # a selection
#   SCALE=0.1 scripts/bench.sh            # quick run: viewers, rates, durations x0.1
#   S1_VIEWERS=5000 S1_DURATION=10 scripts/bench.sh   # one figure overridden
#   SCENARIOS=S3 S3B_RATE=100 S3B_NAME=S3b-100 scripts/bench.sh  # a variant under its own name
#
# Scenarios (see BENCHMARKS.md): SMOKE, S1 hot room, S2 many rooms, S3 capacity
# (S3a idle RSS, S3b 45,000 viewers on 3 comets), S4 ingest, S4F S4's steps
# against a bare send endpoint (not in the default list), S5 seed drop
# policy, J job hot-room figure (100 ms and 1 s windows), R1 delivery under
# jitter (every viewer drops once and resumes), R2 a comet killed under the
# hot room (its viewers resume on another), U1 notices (pushes to users and
# broadcasts), D1 one room of 50,000 viewers with density caps and
# high-priority messages over 4 comets (not in the default list), SS sends
# over sockets against HTTP (not in the default list), CF POST /logic/send
# against Centrifugo (CENTRIFUGO=binary; not in the default list), SC scale-out at fixed load (comets 1 -> 2 -> 3, jobs 1 -> 2,
# on a 3-shard Redis Cluster; not in the default list), T1 the transports (WebSocket
# plain and deflate, SSE) side by side (not in the default list).
# Environment: OUT (results directory, default /tmp/danmaku-bench; FRESH=1 empties it),
# CLUSTER=1 (every scenario on a 3-shard Redis Cluster instead of one server),
# WRITE_MD=0 to leave BENCHMARKS.md alone (a run of a SCENARIOS selection leaves it
# unless WRITE_MD=1 or MD_BLOCK is set), MD_BLOCK (the block of BENCHMARKS.md
# the table replaces, between <!-- MD_BLOCK:begin/end --> lines; default bench,
# appended when missing), PORT_BASE (default 17000), LT_ARGS
# (extra loadtest flags for every run, e.g. "-cpuprofile /tmp/lt.prof"), LOGIC_ARGS,
# JOB_ARGS, COMET_ARGS (extra flags for those servers), SERVER_ENV (environment
# of every server process, e.g. GOMAXPROCS=1), LOGIC_ENV, JOB_ENV, COMET_ENV
# (of one role, after SERVER_ENV), BUILD=0 (run the binaries already in OUT/bin, e.g.
# another tree's, to compare two builds back to back), PERF=1
# (perf record every server process for 10 s, PERF_DELAY s into each run;
# top symbols in OUT/NAME.perf.txt).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
SCALE=${SCALE:-1}
# A selection of scenarios writes BENCHMARKS.md only when asked to (WRITE_MD=1
# or MD_BLOCK): its table would replace the full one.
if [ -z "${SCENARIOS:-}" ] || [ -n "${MD_BLOCK:-}" ]; then WRITE_MD=${WRITE_MD:-1}; fi
SCENARIOS=${SCENARIOS:-"SMOKE S1 J S2 S3 S4 S5 R1 R2 U1"}
OUT=${OUT:-/tmp/danmaku-bench}
WRITE_MD=${WRITE_MD:-0}
MD_BLOCK=${MD_BLOCK:-bench}
PB=${PORT_BASE:-17000}
REDIS_PORT=$((PB + 379))
KAFKA_PORT=$((PB + 92))
LOGIC_PORT=$((PB + 90))
JOB_METRICS_PORT=$((PB + 82))
SECRET=bench-push-secret
ADMIN_SECRET=bench-admin-secret-0123456789
# The comets' auth.hmac_secret: U1's viewers prove their user with a token
# (comets send user notices only to proven users).
TOKEN_SECRET=bench-token-secret-0123456789abcdef
mkdir -p "$OUT"
BIN="$OUT/bin"
LOGS="$OUT/logs"
mkdir -p "$BIN" "$LOGS"
# Results of earlier runs in OUT stay (the table lists every scenario that has
# one, so a single scenario can be re-run); FRESH=1 clears them.
if [ "${FRESH:-0}" = 1 ]; then rm -f "$OUT"/*.json "$OUT"/*.txt "$OUT"/*.rc "$OUT"/*.svg "$OUT"/*.perf.* "$OUT/commands.log"; fi
echo "$(date -u '+%Y-%m-%d %H:%M') SCALE=$SCALE SCENARIOS=\"$SCENARIOS\" PERF=${PERF:-0} scripts/bench.sh" >>"$OUT/commands.log"

PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# scale N MIN: N x SCALE, at least MIN.
scale() { awk -v n="$1" -v s="$SCALE" -v m="$2" 'BEGIN { v = int(n * s + 0.5); if (v < m) v = m; print v }'; }
# val NAME DEFAULT: the environment override NAME or DEFAULT.
val() { local v="${!1:-}"; echo "${v:-$2}"; }

log() { echo "[bench $(date -u +%H:%M:%S)] $*" >&2; }

# Loopback traffic goes through the per-CPU input queue, which drops
# packets beyond net.core.netdev_max_backlog (1000 by default): with ten
# thousand sockets busy, TCP then waits for retransmits (200 ms and more)
# and the figures measure the queue, not the service.
nb=$(cat /proc/sys/net/core/netdev_max_backlog 2>/dev/null || echo 0)
if [ "$nb" -lt 10000 ]; then
	log "net.core.netdev_max_backlog is $nb: loopback drops packets under load; raise it (sysctl -w net.core.netdev_max_backlog=16384)"
fi
# Both ends of every viewer socket are on this host: past the pressure
# threshold of net.ipv4.tcp_mem (pages) the kernel prunes and drops packets
# of every socket, and a hot-room run collapses into retransmit timeouts.
tm=$(awk '{print $2}' /proc/sys/net/ipv4/tcp_mem 2>/dev/null || echo 0)
if [ "$tm" -lt 1000000 ]; then
	log "net.ipv4.tcp_mem pressure threshold is $tm pages: the hot-room scenarios hold more in socket buffers; raise it (sysctl -w net.ipv4.tcp_mem=\"1572864 2097152 3145728\")"
fi

wait_http() { # URL: poll until it answers 200, at most 30 s
	local i
	for i in $(seq 1 300); do
		if curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	log "not ready: $1"
	return 1
}

build() {
	if [ "${BUILD:-1}" = 0 ]; then
		log "BUILD=0: running the binaries already in $BIN"
		return
	fi
	log "building binaries into $BIN"
	go build -o "$BIN/" ./cmd/logic ./cmd/job ./cmd/comet ./cmd/loadtest
}

PROCS=() # NAME=PID for loadtest -pid
REDIS_ADDRS="127.0.0.1:$REDIS_PORT"
start_redis() {
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --logfile "$LOGS/redis.log" &
	PIDS+=($!)
	PROCS+=("redis=$!")
	REDIS_ADDRS="127.0.0.1:$REDIS_PORT"
	local i
	for i in $(seq 1 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
	log "redis did not start"; return 1
}

# start_redis_cluster: three masters without replicas on REDIS_PORT..+2
# (cluster bus +10000), one shard each.
start_redis_cluster() {
	local k p nodes=()
	rm -rf "$OUT/redis-cluster"
	for k in 0 1 2; do
		p=$((REDIS_PORT + k))
		mkdir -p "$OUT/redis-cluster/$p"
		redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
			--dir "$OUT/redis-cluster/$p" --cluster-enabled yes --cluster-config-file nodes.conf \
			--cluster-node-timeout 5000 --logfile "$LOGS/redis$k.log" &
		PIDS+=($!)
		PROCS+=("redis$k=$!")
		nodes+=("127.0.0.1:$p")
		for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
	done
	redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$LOGS/cluster-create.log" 2>&1
	for k in 0 1 2; do
		for _ in $(seq 1 300); do
			redis-cli -p $((REDIS_PORT + k)) cluster info | grep -q cluster_state:ok && break
			sleep 0.1
		done
	done
	REDIS_ADDRS=$(IFS=,; echo "${nodes[*]}")
}

start_kafka() {
	rm -rf "$OUT/kafka-data"
	env ${SERVER_ENV:-} "$BIN/loadtest" -kafka-embedded "127.0.0.1:$KAFKA_PORT" -kafka-data "$OUT/kafka-data" \
		-kafka-topic danmaku-room -kafka-partitions 16 2>"$LOGS/kafka.log" &
	PIDS+=($!)
	PROCS+=("kafka=$!")
	local i
	for i in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_PORT") 2>/dev/null && return 0; sleep 0.1; done
	log "kafka did not start"; return 1
}

COMET_ADDRS=""
start_comets() { # N
	local k p ip
	COMET_ADDRS=""
	for k in $(seq 1 "$1"); do
		p=$((PB + 100 * k))
		ip=$((p + 1))
		env ${SERVER_ENV:-} ${COMET_ENV:-} "$BIN/comet" -config configs/comet.yaml -log.level warn \
			-redis.addrs "$REDIS_ADDRS" -comet.id "bench-c$k" \
			-comet.listen "127.0.0.1:$p" -comet.internal_listen "127.0.0.1:$ip" \
			-comet.advertise "127.0.0.1:$ip" -comet.secret "$SECRET" -comet.max_conns_per_ip 0 \
			-auth.hmac_secret "$TOKEN_SECRET" \
			${COMET_ARGS:-} 2>"$LOGS/comet$k.log" &
		PIDS+=($!)
		PROCS+=("comet$k=$!")
		wait_http "http://127.0.0.1:$p/healthz"
		COMET_ADDRS="${COMET_ADDRS:+$COMET_ADDRS,}127.0.0.1:$p"
	done
}

start_logic() {
	if [ "${FLOOR:-0}" = 1 ]; then
		# Scenario S4F: a bare send endpoint in logic's place.
		env ${SERVER_ENV:-} ${LOGIC_ENV:-} "$BIN/loadtest" -http-floor "127.0.0.1:$LOGIC_PORT" 2>"$LOGS/floor.log" &
		PIDS+=($!)
		PROCS+=("floor=$!")
		wait_http "http://127.0.0.1:$LOGIC_PORT/logic/online?roomId=ready"
		return
	fi
	env ${SERVER_ENV:-} ${LOGIC_ENV:-} "$BIN/logic" -config configs/logic.yaml -log.level warn \
		-redis.addrs "$REDIS_ADDRS" -kafka.brokers "127.0.0.1:$KAFKA_PORT" \
		-logic.listen "127.0.0.1:$LOGIC_PORT" -logic.rate_limit 1000000 -logic.rate_burst 1000000 -logic.ip_rate_limit 0 \
		-logic.admin_secret "$ADMIN_SECRET" ${LOGIC_ARGS:-} \
		2>"$LOGS/logic.log" &
	PIDS+=($!)
	PROCS+=("logic=$!")
	wait_http "http://127.0.0.1:$LOGIC_PORT/logic/online?roomId=ready"
}

JOB_METRICS=""
start_jobs() { # N WINDOW POLICY: N jobs of one consumer group ("job", or job1..jobN)
	local k name port
	JOB_METRICS=""
	for k in $(seq 1 "$1"); do
		port=$((JOB_METRICS_PORT + 1000 * (k - 1)))
		name=job
		[ "$1" = 1 ] || name=job$k
		env ${SERVER_ENV:-} ${JOB_ENV:-} "$BIN/job" -config configs/job.yaml -log.level warn \
			-redis.addrs "$REDIS_ADDRS" -kafka.brokers "127.0.0.1:$KAFKA_PORT" \
			-job.window "$2" -job.policy "$3" -job.push_secret "$SECRET" \
			-job.metrics_addr "127.0.0.1:$port" ${JOB_ARGS:-} \
			2>"$LOGS/$name.log" &
		PIDS+=($!)
		PROCS+=("$name=$!")
		wait_http "http://127.0.0.1:$port/healthz"
		JOB_METRICS="${JOB_METRICS:+$JOB_METRICS,}http://127.0.0.1:$port/metrics"
	done
}

# up COMETS WINDOW POLICY [JOBS]: a fresh stack; on a 3-shard Redis
# Cluster when CLUSTER=1.
LABEL=""
CLUSTER=${CLUSTER:-0}
up() {
	local jobs=${4:-1}
	LABEL="window=$2 policy=$3"
	[ "$jobs" = 1 ] || LABEL="$LABEL jobs=$jobs"
	[ "$CLUSTER" = 0 ] || LABEL="$LABEL redis=cluster-3"
	cleanup
	PROCS=()
	if [ "$CLUSTER" = 0 ]; then start_redis; else start_redis_cluster; fi
	start_kafka
	start_logic
	start_jobs "$jobs" "$2" "$3"
	start_comets "$1"
	# The job's group join and the comets' first leases take a moment.
	sleep 3
}

RESULTS=()
# lt NAME ARGS...: one loadtest run against the current stack.
lt() {
	local name=$1
	shift
	local pidargs=() p
	for p in "${PROCS[@]}"; do pidargs+=(-pid "$p"); done
	log "scenario $name: loadtest $*"
	local perfpid=""
	if [ "${PERF:-0}" = 1 ]; then
		# Sample every server process for 10 s once sending is under way.
		local targets
		targets=$(printf '%s\n' "${PROCS[@]}" | cut -d= -f2 | paste -sd,)
		( sleep "${PERF_DELAY:-20}"
		  perf record -q -F 499 -g -p "$targets" -o "$OUT/$name.perf.data" -- sleep 10 >/dev/null 2>&1
		  perf report -i "$OUT/$name.perf.data" --no-children --sort comm,sym -g none 2>/dev/null \
			| grep -v '^#' | grep -v '^$' | head -40 >"$OUT/$name.perf.txt" ) &
		perfpid=$!
	fi
	set +e
	"$BIN/loadtest" -scenario "$name" -comets "$COMET_ADDRS" -logic "http://127.0.0.1:$LOGIC_PORT" \
		-redis "$REDIS_ADDRS" -job-metrics "$JOB_METRICS" \
		-label "$LABEL" "${pidargs[@]}" -json "$OUT/$name.json" -svg "$OUT/$name.svg" "$@" ${LT_ARGS:-} | tee "$OUT/$name.txt"
	local rc=${PIPESTATUS[0]}
	set -e
	[ -z "$perfpid" ] || wait "$perfpid" || true
	log "scenario $name: exit $rc"
	echo "$rc" >"$OUT/$name.rc"
	RESULTS+=("$name")
}

scenario_SMOKE() {
	up 1 200ms coalesce
	lt SMOKE -viewers 200 -rooms 3 -hot 0.5 -rate 100 -duration 5s -drain 2s
}

# S1: the hot room. S1_COMPRESS=1 makes the viewers offer permessage-deflate
# as browsers do (the comet compresses each frame once and writes the same
# bytes to all; the viewers of a process inflate each frame once between
# them), S1_NAME names the variant.
scenario_S1() {
	up 1 "$(val S1_WINDOW 200ms)" coalesce
	lt "$(val S1_NAME S1)" ${S1_COMPRESS:+-compress} -viewers "$(val S1_VIEWERS "$(scale 10000 50)")" -rooms 1 -rate "$(val S1_RATE "$(scale 1000 20)")" \
		-duration "$(val S1_DURATION "$(scale 30 5)")s" -conn-rate 2000 -exact-sample "$(val S1_EXACT 1000)" \
		-target-p99 500ms -target-dps "$(val S1_TARGET_DPS 2000000)"
}

scenario_S2() {
	up 2 100ms coalesce
	lt S2 -viewers "$(val S2_VIEWERS "$(scale 20000 100)")" -rooms "$(val S2_ROOMS "$(scale 2000 20)")" -zipf 1 \
		-rate "$(val S2_RATE "$(scale 2000 20)")" -duration "$(val S2_DURATION "$(scale 30 5)")s" \
		-conn-rate 2000 -per-process 10000 -target-p99 250ms
}

scenario_S3() {
	up 1 200ms coalesce
	lt S3a -viewers "$(val S3A_VIEWERS "$(scale 15000 100)")" -rooms 1 -idle 10s -rate 1 -duration 2s -conn-rate 2000
	up 3 200ms coalesce
	lt "$(val S3B_NAME S3b)" -viewers "$(val S3B_VIEWERS "$(scale 45000 150)")" -rooms 1 -rate "$(val S3B_RATE "$(scale 1000 20)")" \
		-duration "$(val S3B_DURATION "$(scale 30 5)")s" -conn-rate 3000 -per-process 15000 -source-ips 3 \
		-exact-sample 3000 -target-p99 500ms
}

s4_steps() {
	local d="$(scale 5 2)s"
	val S4_STEPS "r$(scale 2000 100):$d,r$(scale 4000 200):$d,r$(scale 6000 300):$d,r$(scale 10000 400):$d,r$(scale 20000 500):$d,c16:$d,c64:$d,c256:$d"
}

scenario_S4() {
	up 1 200ms coalesce
	local d
	d="$(scale 5 2)s"
	# One message per request, then 50 (logic.max_messages) per request.
	lt S4 -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$(s4_steps)"
	lt S4-batch50 -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -per-post 50 \
		-ingest "$(val S4B_STEPS "r$(scale 200 10):$d,r$(scale 400 20):$d,r$(scale 800 40):$d,c16:$d,c64:$d")"
}

# S4F: S4's single-message steps against a bare send endpoint (loadtest
# -http-floor: net/http and JSON, nothing behind them) in logic's place. Its
# CPU per request is the floor under logic's S4 figure on this machine.
scenario_S4F() {
	FLOOR=1
	up 1 200ms coalesce
	FLOOR=0
	lt S4F -warmup 0 -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$(s4_steps)"
}

# SS: sends over the viewers' sockets (comet.socket_send) against POST
# /logic/send, back to back on the same processes: one message per send at
# 1,000/s, then 32 and 256 senders back to back, for each admission batch
# wait of SS_WAITS (logic.admit_batch_wait and the comet's
# send.admit_batch_wait alike); then S4's ramp both ways. CPU per accepted
# message counts every server process (logic idles while sockets send).
# SS_LOADS picks the loads (default "r1000 c32 c256", at full scale),
# SS_RAMP=0 leaves out the ramp.
scenario_SS() {
	local base_logic="${LOGIC_ARGS:-}" base_comet="${COMET_ARGS:-}" w load name d
	d="$(scale 10 3)s"
	for w in ${SS_WAITS:-3ms 0s}; do
		LOGIC_ARGS="$base_logic -logic.admit_batch_wait $w"
		COMET_ARGS="$base_comet -comet.socket_send -kafka.brokers 127.0.0.1:$KAFKA_PORT -send.rate_limit 1000000 \
			-send.rate_burst 1000000 -send.ip_rate_limit 0 -send.admit_batch_wait $w"
		up 1 200ms coalesce
		for load in ${SS_LOADS:-"r$(scale 1000 100)" c32 c256}; do
			name="SS-w$w-$load"
			lt "$name-http" -warmup 5s -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$load:$d"
			lt "$name-socket" -warmup 0 -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$load:$d" \
				-send-socket "ws://${COMET_ADDRS%%,*}/ws"
		done
	done
	[ "${SS_RAMP:-1}" = 1 ] || { LOGIC_ARGS="$base_logic" COMET_ARGS="$base_comet"; return 0; }
	lt SS-ramp-http -warmup 0 -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$(s4_steps)"
	lt SS-ramp-socket -warmup 0 -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$(s4_steps)" \
		-send-socket "ws://${COMET_ADDRS%%,*}/ws"
	LOGIC_ARGS="$base_logic" COMET_ARGS="$base_comet"
}

# CF: POST /logic/send against Centrifugo with its Redis engine and history
# (100 publications and 300 s per channel), the same loadtest and steps:
# closed loops of CF_LOADS (default "c32 c256", 10 s each), one message per
# request, first on a fresh stack, then on a redis-server of Centrifugo's
# own and Centrifugo's HTTP API (loadtest -centrifugo-key). CENTRIFUGO is
# the path of a centrifugo v6 binary built outside the repository (not in
# the default list).
scenario_CF() {
	local load d cport=$((PB + 800))
	d="$(scale 10 3)s"
	up 1 200ms coalesce
	for load in ${CF_LOADS:-c32 c256}; do
		lt "CF-http-$load" -warmup 5s -viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$load:$d"
	done
	cleanup
	PROCS=()
	COMET_ADDRS=""
	JOB_METRICS=""
	start_redis
	cat >"$OUT/centrifugo.json" <<-JSON
	{"http_api": {"key": "bench-api-key"}, "http_server": {"address": "127.0.0.1", "port": $cport},
	 "health": {"enabled": true}, "log": {"level": "error"},
	 "engine": {"type": "redis", "redis": {"address": ["redis://127.0.0.1:$REDIS_PORT"]}},
	 "channel": {"without_namespace": {"history_size": 100, "history_ttl": "300s"}}}
	JSON
	env ${SERVER_ENV:-} "${CENTRIFUGO:?CENTRIFUGO: path of a centrifugo v6 binary}" -c "$OUT/centrifugo.json" \
		2>"$LOGS/centrifugo.log" >&2 &
	PIDS+=($!)
	PROCS+=("centrifugo=$!")
	wait_http "http://127.0.0.1:$cport/health"
	for load in ${CF_LOADS:-c32 c256}; do
		lt "CF-centrifugo-$load" -logic "http://127.0.0.1:$cport" -centrifugo-key bench-api-key -warmup 0 \
			-viewers 0 -rooms 64 -hot 0.1 -senders 4000 -users 100000 -drain 2s -ingest "$load:$d"
	done
}

scenario_S5() {
	up 1 1s drop
	lt S5 -viewers "$(val S5_VIEWERS "$(scale 10000 50)")" -rooms 1 -rate "$(val S1_RATE "$(scale 1000 20)")" \
		-duration "$(val S1_DURATION "$(scale 30 5)")s" -conn-rate 2000 -exact-sample "$(val S1_EXACT 1000)"
}

# R1: AnyCable's "delivery under jitter": the S1 hot room, every viewer drops
# once at a random moment of sending, stays away about 2 s and resumes with
# since/epoch; a viewer the comet cuts reconnects too (like the browser
# client). Goal: 0 lost, 0 duplicates.
scenario_R1() {
	up 1 "$(val R1_WINDOW 200ms)" coalesce
	lt R1 -viewers "$(val R1_VIEWERS "$(scale 10000 50)")" -rooms 1 -rate "$(val R1_RATE "$(scale 1000 20)")" \
		-duration "$(val R1_DURATION "$(scale 30 5)")s" -conn-rate 2000 -exact-sample "$(val R1_EXACT 1000)" \
		-jitter "$(val R1_JITTER 2s)" -reconnects 3 -target-live-p99 500ms
}

# R2: a comet crash under the hot room. Every viewer is on the first comet,
# the second stands by; 10 s into sending the first is killed (SIGKILL) and
# all its viewers resume on the second at once (a resume storm). Goal: 0
# lost, 0 duplicates; the report gives drop->caught up, and the surviving
# comet's Redis history reads are appended to R2.txt.
scenario_R2() {
	up 2 "$(val R2_WINDOW 200ms)" coalesce
	lt R2 -viewers "$(val R2_VIEWERS "$(scale 10000 50)")" -rooms 1 -rate "$(val R2_RATE "$(scale 1000 20)")" \
		-duration "$(val R2_DURATION "$(scale 20 5)")s" -conn-rate 2000 -exact-sample "$(val R2_EXACT 1000)" \
		-standby 1 -reconnects 3 -kill comet1 -kill-after "$(val R2_KILL_AFTER "$(scale 10 2)")s"
	{ echo "comet2 metrics after the storm:"
	  curl -fsS --max-time 5 "http://127.0.0.1:$((PB + 201))/metrics" \
		| grep -E '^danmaku_comet_(history_reads_total|replays_total|resumes_total|gap_repairs_total)'
	} | tee -a "$OUT/R2.txt"
}

# U1: notices. Every viewer is a user of its own (10,000 in 100 rooms, spread
# evenly, on 2 comets); 2,000 pushes a second go to users drawn at random
# (POST /logic/push/user, one notice each) and 1 broadcast a second to
# everyone (POST /logic/broadcast), for 30 s, no room messages. Goal: 0
# lost, 0 dup; p99 of each kind reported.
scenario_U1() {
	up 2 100ms coalesce
	local rooms
	rooms=$(val U1_ROOMS "$(scale 100 5)")
	lt U1 -viewers "$(val U1_VIEWERS "$(scale 10000 50)")" -rooms "$rooms" -hot "$(awk -v n="$rooms" 'BEGIN { print 1 / n }')" \
		-rate 0 -user-rate "$(val U1_RATE "$(scale 2000 20)")" -broadcast-rate "$(val U1_BROADCAST 1)" \
		-duration "$(val U1_DURATION "$(scale 30 5)")s" -conn-rate 2000 -admin-secret "$ADMIN_SECRET" \
		-token-secret "$TOKEN_SECRET"
}

# SC: scale-out at fixed load on a 3-shard Redis Cluster: comets 1 -> 2 ->
# 3 with one job, then 3 comets with 2 jobs. 6,000 viewers in 200 rooms
# (Zipf s=1), 1,000 msg/s, 20 s, window 200 ms, 10 s idle before sending
# (idle CPU and Redis commands/s of the stack).
scenario_SC() {
	local prev=$CLUSTER spec comets jobs
	CLUSTER=1
	for spec in 1:1 2:1 3:1 3:2; do
		comets=${spec%:*}
		jobs=${spec#*:}
		up "$comets" 200ms coalesce "$jobs"
		local name="SC-c$comets"
		[ "$jobs" = 1 ] || name="$name-j$jobs"
		lt "$name" -viewers "$(val SC_VIEWERS "$(scale 6000 60)")" -rooms "$(val SC_ROOMS "$(scale 200 10)")" -zipf 1 \
			-rate "$(val SC_RATE "$(scale 1000 20)")" -duration "$(val SC_DURATION "$(scale 20 5)")s" \
			-idle "$(val SC_IDLE 10)s" -conn-rate 2000
	done
	CLUSTER=$prev
}

# D1: one room at live-site scale with per-viewer density and the priority
# lane: D1_VIEWERS (50,000) over D1_COMETS comets (4: each under the
# 20,000 open files of a process) and as many viewer processes
# (-per-process), D1_RATE normal messages a second (2,000) plus D1_HIGH
# high-priority ones (5), most viewers capped (D1_TIERS: 30/s, 0.6 % on
# the all tier, 300 of 50,000). Reports each capped viewer's rate against
# its cap over 10 s windows, the high lane (every message x every viewer
# exactly once) and its p99, the all tier's loss and duplicates, comet CPU
# and bytes on the wire per delivered comment. D1_NAME names a variant
# (e.g. D1_NAME=D1-10k D1_VIEWERS=10000 D1_COMETS=1), D1_COMPRESS=1 makes
# viewers offer permessage-deflate. Capped tiers hold their frames for
# comet.density_flush (1 s) unless a push carries a high-priority message:
# D1_HIGH=0.5 shows the held frames, COMET_ARGS=-comet.density_flush=0 a
# frame per batch.
scenario_D1() {
	local comets viewers
	comets=$(val D1_COMETS 4)
	viewers=$(val D1_VIEWERS "$(scale 50000 200)")
	up "$comets" 200ms coalesce
	lt "$(val D1_NAME D1)" -viewers "$viewers" -rooms 1 -rate "$(val D1_RATE "$(scale 2000 20)")" \
		-high-rate "$(val D1_HIGH 5)" -admin-secret "$ADMIN_SECRET" -tiers "$(val D1_TIERS 30:0.994,all:0.006)" \
		-duration "$(val D1_DURATION "$(scale 30 10)")s" -conn-rate "$(val D1_CONN_RATE 2500)" \
		-per-process $(((viewers + comets - 1) / comets)) -source-ips "$comets" -dial-timeout 30s \
		-target-high-p99 500ms ${D1_COMPRESS:+-compress}
}

# T1: the transports side by side: one room on one comet read by
# T1_VIEWERS viewers (2,000) over WebSockets (plain, then offering
# permessage-deflate as browsers do) and over SSE streams (-sse), at
# T1_RATE messages a second (500) for T1_DURATION s, every viewer on the all
# tier so the wire bytes per delivered comment and the comet's CPU per
# delivery compare. Not in the default list.
scenario_T1() {
	local t extra
	for t in ws ws-deflate sse; do
		case $t in ws) extra="" ;; ws-deflate) extra=-compress ;; sse) extra=-sse ;; esac
		up 1 200ms coalesce
		lt "T1-$t" -viewers "$(val T1_VIEWERS "$(scale 2000 50)")" -rooms 1 -rate "$(val T1_RATE "$(scale 500 20)")" \
			-duration "$(val T1_DURATION "$(scale 10 5)")s" -tiers all:1 -conn-rate 2000 $extra
	done
}

scenario_J() {
	local w
	for w in 100ms 1000ms; do
		up 2 "$w" coalesce
		lt "J-$w" -viewers "$(val J_VIEWERS "$(scale 2000 20)")" -rooms 1 -rate "$(val J_RATE "$(scale 1000 20)")" \
			-duration "$(val J_DURATION "$(scale 20 5)")s"
	done
}

build
for s in $SCENARIOS; do
	"scenario_$s"
done
cleanup

# The table and details between the markers of BENCHMARKS.md.
summary() {
	echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
	echo "$(awk '/MemTotal/ {printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo); generator and servers on the same cores; other developers' tests may have been running."
	echo
	echo "Commands (UTC start time; each scenario's exact loadtest command is in its report below):"
	echo
	sed 's/^\(.\{16\}\) \(.*\)$/- \1: `\2`/' "$OUT/commands.log"
	echo
	echo "| scenario | settings | viewers conn/failed | rooms | comets | msg/s sent (accepted) | delivered / expected | lost | dup | p50 ms | p99 ms | p999 ms | max ms | deliveries/s median (min-max) | CPU % (100 = one core) | gen CPU % | machine CPU % | redis cmd/msg | notes | result |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	local n all=()
	local known=" SMOKE S1 R1 R2 J-100ms J-1000ms S2 S3a S3b S4 S4-batch50 S5 U1 D1 SC-c1 SC-c2 SC-c3 SC-c3-j2 " f
	for n in $known; do
		[ -f "$OUT/$n.rc" ] && all+=("$n")
	done
	# Variants run under another name (e.g. S3B_NAME=S3b-100) follow.
	for f in "$OUT"/*.rc; do
		n=$(basename "$f" .rc)
		case "$known" in *" $n "*) ;; *) [ -f "$f" ] && all+=("$n") ;; esac
	done
	for n in "${all[@]}"; do
		[ -f "$OUT/$n.json" ] || { echo "| $n | run failed (exit $(cat "$OUT/$n.rc")) | | | | | | | | | | | | | | | | | | |"; continue; }
		jq -r --arg n "$n" '
		  def r(x): (x * 10 | round) / 10;
		  def notes: [
		    (if .maxIngestPerSecondP99Under50ms then "max \(.maxIngestPerSecondP99Under50ms|round) msg/s with POST p99 < 50 ms" else empty end),
		    (if (.ingest // []) | length > 0 then "CPU us per accepted message: " + ([.servers[]? | "\(.name) \(r(.cpuUsPerAcceptedMessage // 0))"] | join(", ")) + ", all \(r([.servers[]? | .cpuUsPerAcceptedMessage // 0] | add // 0))" else empty end),
		    (if (.ingest // []) | length > 0 then "steps: " + ([.ingest[] | "\(.step): \(.acceptedPerSecond|round)/s p99 \(r(.postP99Ms))"] | join("; ")) else empty end),
		    (if .cometRssPerConnKiB then "comet RSS/conn \(r(.cometRssPerConnKiB)) KiB" else empty end),
		    (if ([.servers[]? | .idleCpuPercent] | add // 0) > 0 then "idle CPU " + ([.servers[]? | select(.name|startswith("comet")) | "\(.name) \(r(.idleCpuPercent))%"] | join(", ")) else empty end),
		    (if .policyDroppedMessages > 0 then "job policy drops: \(.policyDroppedMessages) of \(.send.accepted) msgs" else empty end),
		    (if (.tiers // []) | length > 0 then "tiers: " + ([.tiers[] | (if .max > 0 then "cap \(.max)/s: \(.viewers) viewers, \(.viewersWithin) within ±5% in every 10 s window (\(.windowsWithin)/\(.windows) windows)" else "all tier: \(.viewers) viewers" end)] | join("; ")) else empty end),
		    (if .high then "high lane: \(.high.delivered)/\(.high.expected) delivered, lost \(.high.lost), p99 \(r(.high.latencyMs.p99)) ms" else empty end),
		    (if .wire then "\(r(.wire.bytesPerDelivered)) wire bytes per delivered comment" else empty end),
		    (if .notices then "notices: \(.notices.userSend.accepted) pushes (\(r(.notices.userSend.acceptedPerSecond))/s) + \(.notices.broadcastSend.accepted) broadcasts; push p50/p99 \(r(.notices.userLatencyMs.p50))/\(r(.notices.userLatencyMs.p99)) ms, broadcast p50/p99 \(r(.notices.broadcastLatencyMs.p50))/\(r(.notices.broadcastLatencyMs.p99)) ms; lost \(.notices.userLost)+\(.notices.allLost), dup \(.notices.userDuplicates)+\(.notices.allDuplicates)" else empty end),
		    (if .resume then "resume: \(.resume.reconnects) reconnects, recovered true/false/none \(.resume.recoveredTrue)/\(.resume.recoveredFalse)/\(.resume.recoveredMissing), drop->welcome p50/p99 \(r(.resume.resumeMs.p50))/\(r(.resume.resumeMs.p99)) ms, drop->caught up p50/p99/max \(r(.resume.caughtUpMs.p50))/\(r(.resume.caughtUpMs.p99))/\(r(.resume.caughtUpMs.max)) ms" else empty end),
		    (if .replayLatencyMs.count > 0 then "live frames p50/p99 \(r(.liveLatencyMs.p50))/\(r(.liveLatencyMs.p99)) ms, replay frames p50/p99 \(r(.replayLatencyMs.p50))/\(r(.replayLatencyMs.p99)) ms" else empty end),
		    ((.notes // [])[] | select(startswith("killed"))),
		    (if .viewerStats.closedEarly > 0 then "\(.viewerStats.closedEarly) viewers closed early \(.viewerStats.closes)" else empty end),
		    (if .send.lateSends > 0 then "\(.send.lateSends) late sends" else empty end),
		    (if (.accounting|startswith("exact for a sample")) then "sampled accounting" else empty end)
		  ] | join("; ");
		  "| \($n) | \(.label // "-") | \(.viewerStats.connected)/\(.viewerStats.failed) | \(.rooms) | \(.comets) | \(r(.send.sent / (.send.durationSeconds|if .>0 then . else 1 end))) (\(.send.accepted)) | \(.delivered) / \(.expected) | \(.lost) | \(.duplicates) | \(r(.latencyMs.p50)) | \(r(.latencyMs.p99)) | \(r(.latencyMs.p999)) | \(r(.latencyMs.max)) | \(.deliveriesPerSecond.median|round) (\(.deliveriesPerSecond.min|round)-\(.deliveriesPerSecond.max|round)) | \([.servers[]? | "\(.name) \(r(.cpuPercent))"] | join(", ")) | \(r(.generatorCpuPercent)) | \(r(.machineCpuPercent)) | \(if .redis then r(.redis.perAcceptedMessage) else "-" end) | \(notes) | \(if .pass then "pass" else "FAIL: " + (.problems|join(", ")) end)\(if .targets then "; " + ([.targets[] | (if .met then "met: " else "MISSED: " end) + .name] | join(", ")) else "" end) |"' "$OUT/$n.json"
	done
	echo
	for n in "${all[@]}"; do
		echo "<details><summary>$n report</summary>"
		echo
		echo '```'
		cat "$OUT/$n.txt" 2>/dev/null | sed 's/\r.*//' || true
		echo '```'
		echo "</details>"
		echo
	done
}

if [ "$WRITE_MD" = 1 ]; then
	md="$ROOT/BENCHMARKS.md"
	tmp=$(mktemp)
	summary >"$tmp"
	begin="<!-- $MD_BLOCK:begin -->" end="<!-- $MD_BLOCK:end -->"
	if [ -f "$md" ] && grep -qF "$begin" "$md"; then
		awk -v f="$tmp" -v b="$begin" -v e="$end" '
		  $0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
		  $0 == e { skip = 0 }
		  !skip' "$md" >"$md.new" && mv "$md.new" "$md"
	elif [ -f "$md" ]; then
		{ echo; echo "$begin"; cat "$tmp"; echo "$end"; } >>"$md"
	else
		{ echo "# Benchmarks"; echo; echo "$begin"; cat "$tmp"; echo "$end"; } >"$md"
	fi
	rm -f "$tmp"
	log "results in $OUT, table in BENCHMARKS.md"
fi
fail=0
for n in "${RESULTS[@]}"; do [ "$(cat "$OUT/$n.rc")" = 0 ] || fail=1; done
exit $fail
