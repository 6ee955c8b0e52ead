// Graceful termination: the first SIGTERM or SIGINT asks the process to wind down (roles poll
// terminationRequested() in their loops: a server writes its final checkpoint and says goodbye to the
// scheduler, then exits 0); a second one exits at once with 128 + the signal number.
#pragma once

namespace zps {

// Installs the handlers; call once from main before starting a role. Idempotent.
void installTerminationHandler();
bool terminationRequested();
// The signal that asked for termination (0 when none).
int terminationSignal();

}  // namespace zps
