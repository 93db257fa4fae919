# shellcheck shell=bash
# A process's state read from /proc: proc_state and alive. Self-contained
# (no other module, no setting): test/integration/lib.sh sources it too.

# proc_state PID: PROC_STATE = PID's state letter (R, S, T, Z...), read
# from /proc with no process started (the loops that ask run often, beside
# other clusters); fails if PID is gone.
PROC_STATE=""
proc_state() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    PROC_STATE=${stat:0:1}
}
# alive PID: PID is a live process (not a zombie).
alive() { proc_state "$1" && [[ $PROC_STATE != Z ]]; }
