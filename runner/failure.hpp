#pragma once
// How a step of the runner that can fail says so (STYLE: a result with a reason, never an empty
// string meaning success): std::nullopt when the step did what it was asked, else a failure with
// the reason a sample records ("connect: Connection refused"). The reason stays a string because
// it is the sample's CSV field and the report's error key; what is typed is whether there is one.
#include <optional>
#include <string>
#include <utility>

namespace vlessbench::runner {

struct failure {
  std::string reason;
};

using maybe_failure = std::optional<failure>;

// The same failure with a context in front ("mux connection: " + reason); success stays success.
inline maybe_failure prefixed(const char* context, maybe_failure f) {
  if (f) f->reason.insert(0, context);
  return f;
}

}  // namespace vlessbench::runner
