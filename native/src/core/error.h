// Errors inside the engine: thrown as ember::Error, caught at the C ABI (api.cpp)
// and turned into an ember_status plus a last-error message.
#pragma once

#include <stdexcept>
#include <string>

#include "ember.h"

namespace ember {

class Error : public std::runtime_error {
public:
    Error(ember_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    ember_status status() const { return status_; }

private:
    ember_status status_;
};

[[noreturn]] inline void fail(ember_status status, const std::string& message) {
    throw Error(status, message);
}

}  // namespace ember
