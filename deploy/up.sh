#!/usr/bin/env bash
# Starts a 3-node ringkv cluster with mutual TLS in containers (deploy/compose.yaml):
# builds the image ringkv:dev, creates certificates in deploy/certs/ when missing (or
# $RINGKV_CERTS), starts n1..n3, waits until every node is ready, and prints how to reach it.
# `deploy/up.sh --spare` also starts n4, an empty node for `kvctl ring add`; `--monitoring`
# also starts Prometheus (deploy/monitoring/) scraping n1..n3 with the alert rules loaded.
set -euo pipefail
source "$(dirname "$0")/compose.sh"
certs=${RINGKV_CERTS:-$deploy/certs}
export RINGKV_CERTS=$certs
image=${RINGKV_IMAGE:-ringkv:dev}
nodes=(n1 n2 n3)
profile=()
services=()
for arg in "$@"; do
  case $arg in
  --spare) nodes+=(n4); profile+=(--profile spare) ;;
  --monitoring) services+=(prometheus); profile+=(--profile monitoring) ;;
  *) echo "up.sh: unknown argument $arg (want --spare, --monitoring)" >&2; exit 2 ;;
  esac
done

"$deploy/image.sh"
if [[ ${#services[@]} -gt 0 ]]; then
  "$deploy/monitoring/image.sh"
fi

# Certificates, with the image's own kvctl, owned by the caller. One node certificate serves
# every node: its SANs are the compose host names and the host's loopback.
kvctl() { docker run --rm --user "$(id -u):$(id -g)" -v "$certs:/certs" --entrypoint /kvctl "$image" "$@"; }
mkdir -p "$certs"
[[ -f $certs/ca.crt ]] || kvctl cert create-ca --certs-dir /certs
[[ -f $certs/node.crt ]] || kvctl cert create-node n1 n2 n3 n4 localhost 127.0.0.1 --certs-dir /certs
[[ -f $certs/client.crt ]] || kvctl cert create-client --certs-dir /certs
# The node runs as user 10001 and must read node.key: on this one machine the key is made
# readable to all. On several hosts, give each host its own key owned by the node's user.
chmod 0644 "$certs/node.key"
# Prometheus (user 65534) scrapes with the client certificate: the same holds for its key.
if [[ ${#services[@]} -gt 0 ]]; then
  chmod 0644 "$certs/client.key"
fi

compose "${profile[@]}" up -d "${nodes[@]}" "${services[@]}"

echo -n "waiting for ${nodes[*]} to be ready"
deadline=$((SECONDS + ${RINGKV_UP_TIMEOUT:-90}))
for n in "${nodes[@]}"; do
  id=$(compose "${profile[@]}" ps -q "$n")
  # A founder is ready when its HEALTHCHECK (/readyz) passes; the spare n4 awaits admission
  # (/readyz answers 503 until kvctl ring add), so it only has to be alive (/healthz).
  until if [[ $n == n4 ]]; then docker exec "$id" /kvnode health --certs-dir /certs --path /healthz >/dev/null 2>&1
        else [[ $(docker inspect -f '{{.State.Health.Status}}' "$id") == healthy ]]; fi; do
    if ((SECONDS > deadline)); then
      echo; echo "up.sh: $n is not ready; its log:" >&2
      docker logs --tail 30 "$id" >&2
      exit 1
    fi
    echo -n .
    sleep 1
  done
done
echo " ready"
if [[ ${#services[@]} -gt 0 ]]; then
  prom=${RINGKV_PROMETHEUS_PORT:-19190}
  echo -n "waiting for prometheus"
  until ! command -v curl >/dev/null || curl -sf "http://127.0.0.1:$prom/-/ready" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      echo; echo "up.sh: prometheus is not ready; its log:" >&2
      compose "${profile[@]}" logs --tail 30 prometheus >&2
      exit 1
    fi
    echo -n .
    sleep 1
  done
  echo " ready: http://127.0.0.1:$prom (targets: /targets, alerts: /alerts)"
fi

grpc1=${RINGKV_N1_GRPC:-19091}
http1=${RINGKV_N1_HTTP:-18081}
cat <<MSG

ringkv is up: ${nodes[*]} with mutual TLS (certificates in $certs).
Node i: HTTPS API on 127.0.0.1:1808i, gRPC on 127.0.0.1:1909i (n1: $http1, $grpc1).

  kvctl --addr 127.0.0.1:$grpc1 --certs-dir $certs status
  kvctl --addr 127.0.0.1:$grpc1 --certs-dir $certs put user:1 alice
  kvctl --addr 127.0.0.1:$grpc1 --certs-dir $certs repair
  curl --cacert $certs/ca.crt 'https://127.0.0.1:$http1/v0/entity?id=user:1'
  curl --cacert $certs/ca.crt -X PUT --data-binary bob 'https://127.0.0.1:$http1/v0/entity?id=user:2'

(kvctl: go install ./cmd/kvctl, or: docker run --rm --network host -v $certs:/certs --entrypoint /kvctl $image --certs-dir /certs ...)
Spare node: deploy/up.sh --spare, then kvctl ... ring add n4=n4:9090 --yes
Prometheus with the alert rules: deploy/up.sh --monitoring (docs/operations.md#monitoring)
Replicas converge by themselves too: each node repairs its primary ranges every \$RINGKV_REPAIR_INTERVAL (default 1h).
Stop and remove everything: deploy/down.sh
MSG
