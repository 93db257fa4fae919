#!/usr/bin/env bash
# The DCGM, Neuron and EFA health checks and the checker's configuration
# file on a real cluster (nodes without GPU GRES). dcgmi, fi_info and
# fi_pingpong are stubs that print the unit tests' fixtures and check the
# arguments they get; the Neuron sysfs trees are built from the fixtures.
# Shows: every check not applicable where the node is not meant to have the
# hardware; a healthy pass that leaves the node alone; failures reported
# (--dry-run) and marked FAIL "Action:Replace <check>: ..."; a drain_only
# check marking DRAIN "Action:Drain efa: ..."; a missing tool or driver
# failing; an active check skipped on a busy node; and a bad configuration
# file refused with exit status 2.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
: "${AR_HEALTHCHECK:?set AR_HEALTHCHECK to the built auto-resume-healthcheck}"

cluster_up --nodes 4
cd "$WORK" || exit
fixtures=$AR_SOURCE_DIR/test/unit/fixtures

# Stubs, by their real names, in $WORK/stubs.
mkdir stubs pingpong
cat >stubs/dcgmi <<STUB
#!/bin/bash
# dcgmi stand-in: STUB_DCGM_HEALTH / STUB_DCGM_DIAG name the fixture printed,
# STUB_STATUS the exit status.
case "\$*" in
  "health -c -j") cat $(printf %q "$fixtures/dcgmi")/\${STUB_DCGM_HEALTH:-health-healthy.json} ;;
  "diag -r 2 -j") cat $(printf %q "$fixtures/dcgmi")/\${STUB_DCGM_DIAG:-diag-pass.json} ;;
  *) echo "dcgmi stub: unexpected arguments: \$*"; exit 2 ;;
esac
exit "\${STUB_STATUS:-0}"
STUB
cat >stubs/fi_info <<STUB
#!/bin/bash
[[ "\$*" == "-p efa" ]] || { echo "fi_info stub: unexpected arguments: \$*"; exit 2; }
cat $(printf %q "$fixtures/fi_info/efa-2.txt")
STUB
# fi_pingpong: a server waits for its client; a client's first try finds no
# server listening yet (as one started early does), its second passes, or
# fails where STUB_PINGPONG_FAIL names its domain.
cat >stubs/fi_pingpong <<STUB
#!/bin/bash
out=$(printf %q "$fixtures/fi_pingpong") state=$(printf %q "$WORK/pingpong")
domain='' port='' server_addr=''
while ((\$#)); do
  case \$1 in
    -d) domain=\$2; shift 2 ;;
    -B | -P) port=\$2; shift 2 ;;
    -p | -e | -I) shift 2 ;;
    -*) echo "fi_pingpong stub: unexpected option \$1"; exit 2 ;;
    *) server_addr=\$1; shift ;;
  esac
done
[[ \${FI_EFA_ENABLE_SHM_TRANSFER:-} == 0 ]] || { echo "fi_pingpong stub: shm transfer on"; exit 2; }
[[ -n \$domain && -n \$port ]] || { echo "fi_pingpong stub: no domain or port"; exit 2; }
if [[ -z \$server_addr ]]; then
  for _ in \$(seq 200); do
    [[ -e \$state/\$domain.\$port.done ]] && { cat "\$out/server-ok.txt"; exit 0; }
    sleep 0.05
  done
  echo "fi_pingpong stub: no client came"; exit 1
fi
[[ \$server_addr == 127.0.0.1 ]] || { echo "fi_pingpong stub: client of \$server_addr"; exit 2; }
if [[ ! -e \$state/\$domain.\$port.tried ]]; then
  touch "\$state/\$domain.\$port.tried"
  cat "\$out/refused.txt"; exit 1
fi
touch "\$state/\$domain.\$port.done"
if [[ \$domain == "\${STUB_PINGPONG_FAIL:-}" ]]; then cat "\$out/getinfo-fail.txt"; exit 1; fi
cat "\$out/client-ok.txt"
STUB
chmod +x stubs/*

# make_neuron_tree FIXTURE DIR: a Neuron sysfs tree from its "path:content" lines.
make_neuron_tree() {
  local line path
  while IFS= read -r line; do
    path=$2/${line%%:*}
    mkdir -p "${path%/*}"
    printf '%s\n' "${line#*:}" >"$path"
  done <"$fixtures/neuron/$1"
}
make_neuron_tree healthy.txt neuron-healthy
make_neuron_tree sram-ecc.txt neuron-sram

# check EXPECTED_RC OUT [options...]: run the checker; its exit status must be EXPECTED_RC.
check() {
  local expected=$1 out=$2 rc=0
  shift 2
  "$AR_HEALTHCHECK" "$@" >"$out" 2>&1 || rc=$?
  cat "$out"
  ((rc == expected)) || fail "auto-resume-healthcheck $* exited $rc, not $expected: $(cat "$out")"
}
# reason NODE: the node's reason, without Slurm's "[user@time]".
reason() { scontrol show node "$1" | sed -n 's/^ *Reason=\(.*\) \[.*\]$/\1/p'; }
busy() { [[ $(node_state "$1") =~ ^(allocated|mixed)$ ]]; }

# Not applicable where the node is not meant to have the hardware: no GPU
# GRES, no Neuron or EFA devices configured. No tool is needed for that.
printf 'checks = dcgm, dcgm-diag, neuron, efa\n' >na.conf
check 0 na.out --node node1 --config na.conf
assert_contains na.out "^dcgm: not applicable: no GPUs configured for this node$"
assert_contains na.out "^dcgm-diag: not applicable: no GPUs configured for this node$"
assert_contains na.out "^neuron: not applicable: no Neuron devices configured for this node$"
assert_contains na.out "^efa: not applicable: no EFA devices configured for this node$"

# Healthy: the configuration file alone (tools found in PATH) says what to check.
cat >healthy.conf <<CONF
# A node with 2 GPUs, 2 Neuron devices and 2 EFA devices.
checks=dcgm,dcgm-diag,neuron,efa
gpus=2
neuron_devices=2
efa_devices=2
neuron_sysfs=$WORK/neuron-healthy
timeout=10
CONF
PATH=$WORK/stubs:$PATH check 0 healthy.out --node node1 --config healthy.conf
assert_contains healthy.out "^dcgm: pass: DCGM health watches: Healthy$"
assert_contains healthy.out "^dcgm-diag: pass: 3 tests passed, 1 skipped \(DCGM 4\.2\.3, driver 550\.90\.07\)$"
assert_contains healthy.out "^neuron: pass: 2 Neuron devices healthy \(4 NeuronCores\)$"
assert_contains healthy.out "^efa: pass: 2 EFA devices passed fi_pingpong \(rdmap16s27-rdm, rdmap32s27-rdm\)$"
assert_not_contains healthy.out "mark" "the healthy run"
[[ $(node_state node1) == idle ]] || fail "node1 is $(node_state node1) after a healthy run"

# Failures reported without marking (--dry-run); options override the file.
STUB_DCGM_DIAG=diag-fail.json STUB_STATUS=226 check 1 diag.out --node node1 --config healthy.conf \
  --dcgmi "$WORK/stubs/dcgmi" --check dcgm-diag --dry-run
assert_contains diag.out "^dcgm-diag: fail: memory on GPU 1: CUDA APIs have indicated that a double-bit ECC error has occured on GPU 1\.$"
assert_contains diag.out "^dcgm-diag: would mark node1 FAIL: Action:Replace dcgm-diag: memory on GPU 1: "
STUB_DCGM_HEALTH=health-watches-off.txt STUB_STATUS=1 check 1 dcgm.out --node node1 \
  --config healthy.conf --dcgmi "$WORK/stubs/dcgmi" --check dcgm --dry-run
assert_contains dcgm.out "^dcgm: fail: dcgmi health -c -j: Error: Health watches not enabled\. Please enable watches\.$"
# A node meant to have the hardware whose tool or driver is missing fails.
check 1 missing.out --node node1 --config healthy.conf --check efa neuron dcgm \
  --fi-info "$WORK/no-such-fi_info" --neuron-sysfs "$WORK/no-such-tree" --dcgmi no-such-dcgmi --dry-run
assert_contains missing.out "^efa: fail: cannot run $WORK/no-such-fi_info: No such file or directory$"
assert_contains missing.out "^neuron: fail: no Neuron driver tree at $WORK/no-such-tree \(driver not loaded\?\)$"
assert_contains missing.out "^dcgm: fail: cannot run no-such-dcgmi: No such file or directory$"
assert_contains missing.out "^efa: would mark node1 FAIL: Action:Replace efa: cannot run "
[[ $(node_state node1) == idle ]] || fail "a dry run marked node1: $(node_state node1)"

# A Neuron SRAM ECC error marks node2 FAIL for replacement.
check 1 neuron.out --node node2 --config healthy.conf --check neuron --neuron-sysfs "$WORK/neuron-sram"
assert_contains neuron.out "^neuron: fail: neuron1 sram_ecc_uncorrected=1$"
assert_contains neuron.out "^neuron: marked node2 FAIL: Action:Replace neuron: neuron1 sram_ecc_uncorrected=1$"
wait_until 10 "node2 to be FAIL" node_is node2 fail
assert_eq "$(reason node2)" "Action:Replace neuron: neuron1 sram_ecc_uncorrected=1" "node2's reason"

# drain_only: a failed EFA pingpong only DRAINs node3.
{ cat healthy.conf; echo "drain_only=efa"; } >drain.conf
PATH=$WORK/stubs:$PATH STUB_PINGPONG_FAIL=rdmap32s27-rdm check 1 efa.out --node node3 \
  --config drain.conf --check efa
efa_reason="Action:Drain efa: EFA device rdmap32s27-rdm: fi_pingpong client exited 1: fi_getinfo(): util/pingpong.c:1203, ret=-61 (No data available)"
grep -qxF "efa: marked node3 DRAIN: $efa_reason" efa.out || fail "efa.out does not say the DRAIN mark"
wait_until 10 "node3 to be drained" node_is node3 drained
assert_eq "$(reason node3)" "$efa_reason" "node3's reason"
scontrol -o show node node3 | grep -q "State=[A-Z+]*DRAIN" || fail "node3: $(scontrol -o show node node3)"
scontrol -o show node node3 | grep -q "State=[A-Z+]*FAIL" && fail "node3 FAILed: $(scontrol -o show node node3)"

# An active check is skipped on a node that runs jobs.
job=$(sbatch --parsable -w node4 -o /dev/null --wrap 'sleep 120')
# shellcheck disable=SC2016 # expanded when the test ends
on_exit 'scancel "$job"'
wait_until 30 "job $job to run on node4" busy node4
PATH=$WORK/stubs:$PATH check 0 busy.out --node node4 --config healthy.conf --check dcgm-diag neuron
assert_contains busy.out "^dcgm-diag: skipped: node4 runs jobs"
assert_contains busy.out "^neuron: pass: "

# A bad configuration file: exit status 2, naming file, line and value.
printf 'checks=gpu\nefa_devices=two\n' >bad.conf
check 2 bad.out --node node1 --config bad.conf
assert_contains bad.out "bad\.conf:2: invalid value 'two' for efa_devices"
check 2 nofile.out --node node1 --config "$WORK/no-such.conf"
assert_contains nofile.out "cannot read configuration file '$WORK/no-such.conf'"
note "ok"
