// Placement policy: which device a context's layers go to, and how many of them fit. The
// context measures what each layer needs (it knows its graphs and caches); the choices and
// the sentences that explain them to users are made here, with no model in sight.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/registry.h"

namespace ember {

// The devices to try for a backend spec ("auto", "cpu", "cuda", "cuda:1"), best first;
// reasons gets a sentence per backend or device ruled out. Throws ember::Error on a spec
// that names no backend or a malformed device number.
struct DeviceChoice {
    std::string name;  // the spec's backend name ("auto", "cpu", ...)
    std::vector<std::pair<const BackendRecord*, int>> candidates;
    std::vector<std::string> reasons;
};
DeviceChoice choose_devices(const std::string& spec);

// What offloading layers [0, n_layers) needs, measured by the context: per layer whether
// the device computes all of it (and the first thing it lacks, "mul_mat of Q4_0"), its
// bytes (weights and cache), and the compute buffer and inputs beside them.
struct LayerNeeds {
    std::vector<uint8_t> supported;
    std::vector<std::string> lacks;
    std::vector<uint64_t> bytes;
    uint64_t fixed_bytes = 0;  // the compute buffer, the inputs, slack
};

// The layers that go on the device: the last n_wanted (-1: all) that it supports, from the
// output head down, while they fit in its free memory less a margin for the driver and
// other programs. count 0 with why set when none can; otherwise note says what was kept.
struct LayerPlan {
    std::vector<uint8_t> on;
    int32_t count = 0;
    uint64_t used = 0;
    std::string why;   // count 0: the reason, for the placement note
    std::string note;  // count > 0: layers kept on the CPU, and why ("" when none)
};
LayerPlan plan_layers(const LayerNeeds& needs, const BackendDeviceInfo& info, int32_t n_wanted,
                      const std::string& label);

}  // namespace ember
