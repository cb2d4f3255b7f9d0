# mpnet.sh - the network namespaces of the multi-path benchmarks
# (multipath.sh, failover.sh), sourced, not run.
#
# Two namespaces $P0 and $P1 (P, default mpb), each with two veth links on
# bridges of their own in $Pbr: eth0 192.168.90.(10+i) and eth1
# 192.168.91.(10+i), the links the ranks use (shaped with tbf by `rates`),
# and an unshaped eth2 192.168.92.(10+i) for the store ($STORE_ADDR), so
# that taking eth0 or eth1 down leaves the job's store reachable.
# `mpnet_run HCOMM LABEL PER env... -- command...` starts PER ranks a host.
# Needs root, iproute2 and tc.
P=${P:-mpb}
STORE_ADDR=192.168.92.10:0

# failstream_bin builds failstream (the rank program of failover.sh and
# mppaths.sh) into $DIR, unless FAILSTREAM already names one.
failstream_bin() {
  if [ -z "${FAILSTREAM:-}" ]; then
    FAILSTREAM=$DIR/failstream
    (cd "$(dirname "${BASH_SOURCE[0]}")" && go build -o $FAILSTREAM ./failstream)
  fi
}

down() { for ns in ${P}br ${P}0 ${P}1; do ip netns del $ns 2>/dev/null || true; done; }
shape() { # ns dev rate
  ip netns exec $1 tc qdisc replace dev $2 root tbf rate $3 burst 1mb latency 20ms
}
up() {
  down
  ip netns add ${P}br
  ip -n ${P}br link set lo up
  for b in 0 1 2; do
    ip -n ${P}br link add br$b type bridge
    ip -n ${P}br link set br$b up
  done
  for i in 0 1; do
    ns=$P$i
    ip netns add $ns
    ip -n $ns link set lo up
    for b in 0 1 2; do
      ip -n $ns link add eth$b type veth peer name p$b$i netns ${P}br
      ip -n $ns addr add 192.168.9$b.$((10 + i))/24 dev eth$b
      ip -n $ns link set eth$b up
      ip -n ${P}br link set p$b$i master br$b
      ip -n ${P}br link set p$b$i up
    done
  done
  sleep 1
}
rates() { # rate0 rate1
  for i in 0 1; do shape $P$i eth0 $1; shape $P$i eth1 $2; done
}

# The remote shell `hcomm run --rsh` uses: the host is a namespace.
RSH=$(mktemp)
printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" sh -c "$*"\n' > $RSH
chmod +x $RSH
trap 'down; rm -f $RSH' EXIT

mpnet_run() { # hcomm per-host env... -- command...
  local hcomm=$1 per=$2; shift 2
  local xs=()
  while [ "$1" != -- ]; do xs+=(-x "$1"); shift; done
  shift
  ip netns exec ${P}0 $hcomm run --hosts ${P}0:$per,${P}1:$per --rsh $RSH --store-addr $STORE_ADDR \
    "${xs[@]}" -- "$@"
}
