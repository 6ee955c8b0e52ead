// Settings of security and observability, and the test hooks (one constant each; see
// ps/common/settings.h).
#pragma once

#include "ps/common/setting.h"

// Each constant names only the fields it sets; the others keep setting.h's defaults (which GCC's
// -Wmissing-field-initializers would report once per constant).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace zps::settings {

// The headings these settings appear under in help and docs.
inline constexpr std::string_view kGroupSecurity = "Security";
inline constexpr std::string_view kGroupObservability = "Observability";
inline constexpr std::string_view kGroupTesting = "Testing";

// Security: environment only, so that secrets never appear in a process list.
inline constexpr Setting kAuthToken{
    .name = "auth_token",
    .flag = false,
    .env = {"ZPS_AUTH_TOKEN"},
    .type = SettingType::kText,
    .help = "shared secret every node presents when it registers (never logged)",
    .group = kGroupSecurity,
};
inline constexpr Setting kAuthTokenFile{
    .name = "auth_token_file",
    .flag = false,
    .env = {"ZPS_AUTH_TOKEN_FILE"},
    .type = SettingType::kText,
    .help = "file holding the shared secret (wins over ZPS_AUTH_TOKEN)",
    .group = kGroupSecurity,
};
inline constexpr Setting kCurve{
    .name = "curve",
    .flag = false,
    .env = {"ZPS_CURVE"},
    .type = SettingType::kSwitch,
    .default_text = "0",
    .help = "1: encrypt every connection (CurveZMQ); needs an auth token",
    .group = kGroupSecurity,
};

// Observability (ps/node/observability.cc).
inline constexpr Setting kMetricsPort{
    .name = "metrics_port",
    .env = {"ZPS_METRICS_PORT"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = 65535,
    .hint = "a free TCP port for /metrics, or 0 for none",
    .help =
        "serve Prometheus /metrics (and on the scheduler the dashboard and /api/status) on this "
        "TCP port; 0: off",
    .group = kGroupObservability,
};
inline constexpr Setting kMetricsHost{
    .name = "metrics_host",
    .env = {"ZPS_METRICS_HOST"},
    .type = SettingType::kText,
    .help =
        "the address the /metrics endpoint listens on (default: as ZPS_BIND_HOST; 127.0.0.1: this "
        "machine only)",
    .group = kGroupObservability,
};
inline constexpr Setting kTraceOn{
    .name = "trace_on",
    .env = {"ZPS_TRACE_ON"},
    .type = SettingType::kSwitch,
    .default_text = "0",
    .help = "write a Chrome trace-event timeline of push, sum and pull",
    .group = kGroupObservability,
};
inline constexpr Setting kTraceStartStep{
    .name = "trace_start_step",
    .env = {"ZPS_TRACE_START_STEP"},
    .type = SettingType::kInteger,
    .default_text = "1",
    .min = 1,
    .max = int64_t{1} << 50,
    .hint = "a step from 1",
    .help = "first round (training step) in the timeline",
    .group = kGroupObservability,
};
inline constexpr Setting kTraceEndStep{
    .name = "trace_end_step",
    .env = {"ZPS_TRACE_END_STEP"},
    .type = SettingType::kInteger,
    .default_text = "20",
    .min = 1,
    .max = int64_t{1} << 50,
    .hint = "a step from 1",
    .help = "last round (training step) in the timeline",
    .group = kGroupObservability,
};
inline constexpr Setting kTraceDir{
    .name = "trace_dir",
    .env = {"ZPS_TRACE_DIR"},
    .type = SettingType::kText,
    .default_text = "zps-trace",
    .help = "folder for the timeline files (<role>-<rank>.json)",
    .group = kGroupObservability,
};

// Testing: fault injection and test hooks, never for production jobs.
inline constexpr Setting kTestFaults{
    .name = "test_faults",
    .flag = false,
    .env = {"ZPS_TEST_FAULTS"},
    .type = SettingType::kText,
    .help = "inject transport faults (tests only; see ps/transport/faulty_transport.h)",
    .group = kGroupTesting,
};
inline constexpr Setting kTestLocalCrash{
    .name = "test_local_crash",
    .flag = false,
    .env = {"ZPS_TEST_LOCAL_CRASH"},
    .type = SettingType::kInteger,
    .default_text = "-1",
    .min = -1,
    .max = 1023,
    .hint = "a local rank, or -1 for none",
    .help =
        "the local rank that kills itself (SIGKILL) at its first local reduction; -1: none (tests of the local "
        "reducer only)",
    .group = kGroupTesting,
};
inline constexpr Setting kTestLocalSlowExit{
    .name = "test_local_slow_exit",
    .flag = false,
    .env = {"ZPS_TEST_LOCAL_SLOW_EXIT"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = 60000,
    .hint = "milliseconds, e.g. 3000",
    .help =
        "milliseconds a local rank other than 0 pauses at the job's end between its two checks (tests of the "
        "end-of-job handshake only)",
    .group = kGroupTesting,
};

}  // namespace zps::settings

#pragma GCC diagnostic pop
