// Preemption: SIGTERM or SIGINT asks a training run to stop at the end of
// the current step. (SIGUSR1 asks for a flight recorder dump without
// stopping, runtime/reliability/watchdog.h; its handler is installed here too, so that
// one place owns the process's signals.) The handlers only record the signal; the ranks
// then agree, once per step, whether any of them was asked (a scheduler may
// signal one rank, or each at a different time), so all stop after the same
// step. A second SIGINT exits at once with 130, for a person at a terminal.
#pragma once

namespace fsdpc {

// Installs the handlers (idempotent). Before this, the signals keep their
// default action (termination).
void install_stop_handlers();
// The first stop signal this process received, or 0.
int stop_signal();
// "SIGTERM", "SIGINT", "SIGUSR1", else "a signal": for the messages that
// say what stopped a run.
const char* stop_signal_name(int sig);
// Whether SIGUSR1 arrived since the last call (then true once): the
// watchdog's safe points write the flight recorder.
bool take_flight_dump_request();
// Collective over MPI_COMM_WORLD: the largest stop_signal() of any rank, or
// 0 when none was asked to stop. Every rank gets the same answer.
int agree_on_stop();

}  // namespace fsdpc
