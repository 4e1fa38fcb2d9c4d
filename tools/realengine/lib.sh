# Helpers the real-engine lane's scripts source. Callers set $cache (the
# lane's cache directory) first.

# timed <what> <command...>: runs the command and records its seconds in
# $cache/timings.log (the cold and warm build times docs/testing.md cites).
timed() {
	local what="$1" start=$SECONDS
	shift
	echo "realengine: $what" >&2
	"$@"
	printf '%s %-40s %5ds\n' "$(date -u +%FT%TZ)" "$what" $((SECONDS - start)) | tee -a "$cache/timings.log" >&2
}

# on <value>: whether a gate such as CI or KROPS_REAL_ENGINE is set to
# something other than empty, 0, false, no or off.
on() { case "${1:-}" in "" | 0 | false | no | off) return 1 ;; esac; }
