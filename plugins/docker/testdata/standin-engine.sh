#!/bin/sh
# STAND-IN for the docker/podman CLI (no container engine runs on the test
# machines). It appends its argv to $STANDIN_DIR/log and answers from
# $STANDIN_DIR/state, a shell fragment setting:
#   exists=0|1 running=0|1 port=<published registry port> network=<name>
#   engine_down=0|1
set -eu
echo "$*" >> "$STANDIN_DIR/log"
exists=0 running=0 port=5001 network=kind engine_down=0
. "$STANDIN_DIR/state"
case "$1" in
info)
	[ "$engine_down" = 1 ] && { echo "Cannot connect to the Docker daemon" >&2; exit 1; }
	exit 0 ;;
--version) echo "Docker version 28.2.2, build e6534b4" ;;
container)
	if [ "$exists" != 1 ]; then
		echo "Error: No such container: $3" >&2
		exit 1
	fi
	r=false; [ "$running" = 1 ] && r=true
	printf '[{"State":{"Running":%s},"NetworkSettings":{"Ports":{"5000/tcp":[{"HostIp":"127.0.0.1","HostPort":"%s"}]},"Networks":{"%s":{}}}}]\n' "$r" "$port" "$network" ;;
port) printf '0.0.0.0:55001\n[::]:55001\n' ;;
run|rm|start|network) exit 0 ;;
*) echo "stand-in engine: unexpected $*" >&2; exit 2 ;;
esac
