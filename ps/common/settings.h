// Every process-wide setting, one constant each (the fields are described in setting.h), in the
// headers below by topic. Adding a setting is adding a constant to one of them, listing it in
// settings_table.cc (in the order help and docs print them) and reading it where it is used:
// readInteger(env, settings::kLocalSize). `zps help env`, the flags, docs/configuration.md and the C
// API's zps_setting_* follow from the constant (regenerate the docs with `cmake --build build --target
// configuration-docs`); a default that is not a valid value does not compile (validSetting, checked for
// the whole table in settings_table.cc), and a unit test fails when a constant is missing from the table.
#pragma once

#include "ps/common/settings/cluster.h"
#include "ps/common/settings/messages.h"
#include "ps/common/settings/operations.h"
#include "ps/common/settings/training.h"
