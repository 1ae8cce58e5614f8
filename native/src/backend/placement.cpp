#include "backend/placement.h"

#include <algorithm>

#include "backend/sched.h"
#include "core/error.h"

namespace ember {

DeviceChoice choose_devices(const std::string& spec) {
    DeviceChoice out;
    std::string name = spec.empty() ? "auto" : spec;
    int device = -1;
    const size_t colon = name.find(':');
    if (colon != std::string::npos) {
        const std::string num = name.substr(colon + 1);
        name = name.substr(0, colon);
        if (num.empty() || num.size() > 4 || num.find_first_not_of("0123456789") != std::string::npos)
            fail(EMBER_ERR_INVALID_ARGUMENT, "backend device must be a number: '" + spec + "'");
        device = std::stoi(num);
    }
    out.name = name;
    if (name == "cpu") return out;
    if (name == "auto") {
        std::vector<BackendDeviceRow> rows = backend_devices();
        std::stable_sort(rows.begin(), rows.end(), [](const BackendDeviceRow& a, const BackendDeviceRow& b) {
            if (a.backend->score != b.backend->score) return a.backend->score > b.backend->score;
            return a.info.memory_free > b.info.memory_free;
        });
        for (const BackendDeviceRow& r : rows) {
            if (r.backend->name == "cpu") continue;
            if (!r.backend->usable) out.reasons.push_back(r.backend->label + ": " + r.backend->reason);
            else out.candidates.emplace_back(r.backend, r.device);
        }
        return out;
    }
    const BackendRecord* be = find_backend(name);
    if (!be) {
        std::string known;
        for (const BackendRecord& r : backend_registry()) known += (known.empty() ? "" : ", ") + r.name;
        fail(EMBER_ERR_INVALID_ARGUMENT, "no backend named '" + name + "' (known: auto, " + known + ")");
    }
    if (!be->usable) {
        out.reasons.push_back(be->label + ": " + be->reason);
    } else if (device >= 0) {
        const int n = be->iface->device_count();
        if (device >= n)
            out.reasons.push_back(be->label + ": there is no device " + std::to_string(device) + " (it has " +
                                  std::to_string(n) + ")");
        else out.candidates.emplace_back(be, device);
    } else {
        for (int d = 0; d < be->iface->device_count(); ++d) out.candidates.emplace_back(be, d);
    }
    return out;
}

LayerPlan plan_layers(const LayerNeeds& needs, const BackendDeviceInfo& info, int32_t n_wanted,
                      const std::string& label) {
    const int32_t n_layers = (int32_t)needs.bytes.size();
    const int32_t n_layer = n_layers - 1;  // the last one is the output head
    // what the driver, other programs and fragmentation need beside us: 5%, 32 MiB to 1 GiB
    const uint64_t margin = std::min<uint64_t>(std::max<uint64_t>(info.memory_total / 20, 32ull << 20), 1ull << 30);
    const uint64_t budget = info.memory_free > margin ? info.memory_free - margin : 0;
    const int32_t wanted = n_wanted < 0 ? n_layers : std::min(n_wanted, n_layers);
    LayerPlan plan;
    plan.on.assign((size_t)n_layers, 0);
    plan.used = needs.fixed_bytes;
    int32_t unsupported = 0;
    std::string lack_note;
    bool out_of_memory = false;
    uint64_t first_need = 0;
    for (int32_t il = n_layer; il > n_layer - wanted; --il) {
        if (!needs.supported[(size_t)il]) {
            ++unsupported;
            if (lack_note.empty()) lack_note = needs.lacks[(size_t)il];
            continue;
        }
        if (plan.used + needs.bytes[(size_t)il] > budget) {
            out_of_memory = true;
            if (!first_need) first_need = plan.used + needs.bytes[(size_t)il];
            break;
        }
        plan.used += needs.bytes[(size_t)il];
        plan.on[(size_t)il] = 1;
        ++plan.count;
    }
    if (plan.count == 0) {
        if (out_of_memory)
            plan.why = label + ": too little memory on " + info.name + " (" + bytes_text(first_need) +
                       " needed for one layer and the buffers, plus a " + bytes_text(margin) + " margin; " +
                       bytes_text(info.memory_free) + " free)";
        else
            plan.why = label + ": " + info.name + " cannot compute these layers (no " + lack_note + ")";
        return plan;
    }
    if (unsupported)
        plan.note = std::to_string(unsupported) + " layer" + (unsupported > 1 ? "s" : "") + " kept on the CPU (" +
                    label + " has no " + lack_note + ")";
    if (out_of_memory)
        plan.note += (plan.note.empty() ? "" : "; ") + std::to_string(plan.count) + " of " + std::to_string(wanted) +
                     " layers fit in the " + bytes_text(info.memory_free) + " free on " + info.name;
    return plan;
}

}  // namespace ember
