#!/usr/bin/env bash
# Roles on separate hosts: every process of the service in a network
# namespace of its own, joined by veth pairs to a bridge, with private
# addresses that exist only inside the namespaces. Nothing is added to the
# host's own network namespace (no interface, address or route), so the
# host's network is untouched; everything is removed at the end, also on
# failure or Ctrl-C.
#
#   sudo scripts/netns.sh                 # build, start, load, check, clean up
#   sudo VIEWERS=3000 RATE=500 DURATION=30s scripts/netns.sh
#   sudo scripts/netns.sh clean           # remove what a killed run left
#
# Hosts (namespace NAME-<host>, address NET.<n>/24):
#
#   svc     .2    Redis Cluster: 3 masters + 3 replicas on ports 7000-7005,
#                 and cmd/devkafka on 9092
#   logic   .10   :8090
#   job1    .21   /metrics on :8082
#   job2    .22   /metrics on :8082
#   comet1  .31   public :8080, internal :8081, advertises NET.31:8081
#   comet2  .32   ...
#   comet3  .33
#   client  .100  cmd/loadtest: viewers on every comet, messages to logic
#   hub     -     the bridge the others are plugged into
#
# Every listener is ":port" (all interfaces of its namespace, which has only
# its own address and loopback), so a role that tried to reach another one
# on 127.0.0.1 would fail: each must use the address it is given. The run
# passes when loadtest reports 0 lost and 0 duplicated deliveries and every
# comet took pushes from a job on its advertised address.
#
# Needs root (ip netns), iproute2, redis-server, redis-cli, curl and Go.
# Environment: VIEWERS (600), ROOMS (10), RATE (messages/s, 200),
# DURATION (10s), NET (10.77.0), KEEP=1 keeps the logs directory.
set -euo pipefail

cd "$(dirname "$0")/.."
VIEWERS=${VIEWERS:-600}
ROOMS=${ROOMS:-10}
RATE=${RATE:-200}
DURATION=${DURATION:-10s}
NET=${NET:-10.77.0}
PREFIX=dmns
NAME=$PREFIX$$
SECRET=netns-push-secret

log() { echo "[netns $(date -u +%H:%M:%S)] $*" >&2; }

if [ "${1:-}" = clean ]; then
	# Namespaces of runs that were killed before their cleanup ran; their
	# processes are killed first (a namespace lives while a process does).
	for ns in $(ip netns list | awk '{print $1}' | grep -E "^$PREFIX[0-9]+-" || true); do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		ip netns del "$ns" && log "removed namespace $ns"
	done
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "scripts/netns.sh: needs root (ip netns add)" >&2
	exit 2
fi
for c in ip redis-server redis-cli curl go; do
	command -v "$c" >/dev/null || { echo "scripts/netns.sh: $c not found" >&2; exit 2; }
done

OUT=$(mktemp -d /tmp/danmaku-netns.XXXXXX)
BIN=$OUT/bin
mkdir -p "$BIN" "$OUT/logs"
PIDS=()
NAMESPACES=()
OK=0

cleanup() {
	local p ns
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	for ns in "${NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
	if [ "$OK" = 1 ] && [ "${KEEP:-0}" != 1 ]; then
		rm -rf "$OUT"
	else
		log "logs kept in $OUT/logs"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# on HOST CMD...: run CMD in HOST's namespace.
on() { local h=$1; shift; ip netns exec "$NAME-$h" "$@"; }

# start HOST LOGNAME CMD...: start CMD in HOST's namespace in the background.
start() {
	local h=$1 l=$2
	shift 2
	ip netns exec "$NAME-$h" "$@" >"$OUT/logs/$l.log" 2>&1 &
	PIDS+=($!)
}

# wait_http URL: from the client host, until URL answers 200 (30 s).
wait_http() {
	for _ in $(seq 1 300); do
		on client curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	log "not answering: $1"
	return 1
}

declare -A ADDR=([svc]=2 [logic]=10 [job1]=21 [job2]=22 [comet1]=31 [comet2]=32 [comet3]=33 [client]=100)
HOSTS="svc logic job1 job2 comet1 comet2 comet3 client"

network() {
	ip netns add "$NAME-hub"
	NAMESPACES+=("$NAME-hub")
	ip -n "$NAME-hub" link add br0 type bridge
	ip -n "$NAME-hub" link set br0 up
	local h
	for h in $HOSTS; do
		ip netns add "$NAME-$h"
		NAMESPACES+=("$NAME-$h")
		# Both ends are created inside namespaces: the host's never sees them.
		ip -n "$NAME-hub" link add "v-$h" type veth peer name eth0 netns "$NAME-$h"
		ip -n "$NAME-hub" link set "v-$h" master br0 up
		ip -n "$NAME-$h" addr add "$NET.${ADDR[$h]}/24" dev eth0
		ip -n "$NAME-$h" link set eth0 up
		ip -n "$NAME-$h" link set lo up
	done
	log "namespaces $NAME-{hub,${HOSTS// /,}} on $NET.0/24"
}

REDIS_ADDRS=""
redis_cluster() {
	local svc=$NET.${ADDR[svc]} port nodes=()
	for port in 7000 7001 7002 7003 7004 7005; do
		mkdir -p "$OUT/redis/$port"
		start svc "redis-$port" redis-server --bind "$svc" --port "$port" --dir "$OUT/redis/$port" \
			--save '' --appendonly no --protected-mode no --cluster-enabled yes \
			--cluster-config-file nodes.conf --cluster-node-timeout 2000 \
			--cluster-announce-ip "$svc" --repl-diskless-sync-delay 0
		nodes+=("$svc:$port")
	done
	for port in 7000 7001 7002 7003 7004 7005; do
		for _ in $(seq 1 100); do on svc redis-cli -h "$svc" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
	done
	on svc redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$OUT/logs/cluster-create.log" 2>&1
	for port in 7000 7001 7002 7003 7004 7005; do
		for _ in $(seq 1 300); do
			on svc redis-cli -h "$svc" -p "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
			sleep 0.1
		done
	done
	REDIS_ADDRS=$(IFS=,; echo "${nodes[*]}")
	log "redis cluster on $REDIS_ADDRS"
}

start_roles() {
	local svc=$NET.${ADDR[svc]} k
	start svc devkafka "$BIN/devkafka" -addr "$svc:9092"
	for _ in $(seq 1 100); do grep -q listening "$OUT/logs/devkafka.log" && break; sleep 0.1; done
	start logic logic "$BIN/logic" -config configs/logic.yaml -redis.addrs "$REDIS_ADDRS" \
		-kafka.brokers "$svc:9092" -logic.listen :8090 -logic.rate_limit 1000000 -logic.rate_burst 1000000 \
		-logic.ip_rate_limit 0 # every request comes from the one client address
	wait_http "http://$NET.${ADDR[logic]}:8090/readyz"
	for k in 1 2 3; do
		start "comet$k" "comet$k" "$BIN/comet" -config configs/comet.yaml -redis.addrs "$REDIS_ADDRS" \
			-comet.id "comet$k" -comet.listen :8080 -comet.internal_listen :8081 \
			-comet.advertise "$NET.${ADDR[comet$k]}:8081" -comet.secret "$SECRET" -comet.max_conns_per_ip 0
	done
	for k in 1 2; do
		start "job$k" "job$k" "$BIN/job" -config configs/job.yaml -redis.addrs "$REDIS_ADDRS" \
			-kafka.brokers "$svc:9092" -job.metrics_addr :8082 -job.push_secret "$SECRET" -job.window 200ms
	done
	for k in 1 2 3; do wait_http "http://$NET.${ADDR[comet$k]}:8080/healthz"; done
	for k in 1 2; do wait_http "http://$NET.${ADDR[job$k]}:8082/healthz"; done
	log "logic, 2 jobs and 3 comets serving"
}

# pushes HOST: push batches the comet on HOST accepted, from its metrics.
pushes() {
	on client curl -fsS --max-time 2 "http://$NET.${ADDR[$1]}:8081/metrics" |
		awk '/^danmaku_comet_push_batches_total\{result="ok"\}/ {print $2}'
}

load() {
	local comets="" k pids=()
	for k in 1 2 3; do comets="${comets:+$comets,}$NET.${ADDR[comet$k]}:8080"; done
	log "loadtest: $VIEWERS viewers in $ROOMS rooms, $RATE msg/s for $DURATION"
	set +e
	on client "$BIN/loadtest" -scenario netns -quiet -comets "$comets" -logic "http://$NET.${ADDR[logic]}:8090" \
		-job-metrics "http://$NET.${ADDR[job1]}:8082/metrics,http://$NET.${ADDR[job2]}:8082/metrics" \
		-viewers "$VIEWERS" -rooms "$ROOMS" -rate "$RATE" -duration "$DURATION" -json "$OUT/netns.json" |
		tee "$OUT/logs/loadtest.log"
	local rc=${PIPESTATUS[0]}
	set -e
	for k in 1 2 3; do
		local n
		n=$(pushes "comet$k")
		log "comet$k ($NET.${ADDR[comet$k]}:8081) accepted ${n:-0} push batches"
		if [ -z "$n" ] || [ "${n%.*}" -eq 0 ]; then
			log "FAIL: comet$k took no push on its advertised address"
			rc=1
		fi
	done
	return "$rc"
}

log "building into $BIN"
go build -o "$BIN/" ./cmd/logic ./cmd/job ./cmd/comet ./cmd/devkafka ./cmd/loadtest
network
redis_cluster
start_roles
if load; then
	OK=1
	log "PASS: 0 lost, 0 duplicated, every comet pushed to across the bridge"
else
	log "FAIL: see $OUT/logs"
	exit 1
fi
