// `zps launch`: a whole job on one machine (scheduler, servers, workers) for trying zps out and
// for tests, with every child's output prefixed by its role and the job's status (the scheduler's
// /api/summary) shown as a live line on a terminal, or as periodic plain lines otherwise.
#pragma once

namespace zps {

// argv[0] is "launch"; the rest are its arguments:
//   zps launch --servers S --workers W [--host H] [--port P] [--timeout SECONDS] [--progress SECONDS]
//              -- CMD ARGS...
// The job gets a fresh random ZPS_AUTH_TOKEN unless the environment sets one, and the nodes start only
// once the scheduler listens on its port.
// Returns the process exit code: 0 when every child exits 0; 2 for a user error (bad arguments or
// settings, or any child that exited 2); else the first non-zero child exit code; 124 on --timeout;
// 130/143 on SIGINT/SIGTERM; 127 when a child cannot be started. Installs its own SIGINT/SIGTERM/SIGCHLD/SIGPIPE
// handlers while it runs and restores the previous ones before returning. Call it from the main thread, once.
int launchMain(int argc, char** argv);

}  // namespace zps
