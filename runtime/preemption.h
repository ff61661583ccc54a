// Preemption: SIGTERM, SIGINT or SIGUSR1 asks a training run to stop at the
// end of the current step. The handlers only record the signal; the ranks
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
// Collective over MPI_COMM_WORLD: the largest stop_signal() of any rank, or
// 0 when none was asked to stop. Every rank gets the same answer.
int agree_on_stop();

}  // namespace fsdpc
