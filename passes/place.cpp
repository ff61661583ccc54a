// place (place.h).
#include "passes/place.h"

namespace fsdpc {

namespace {

void place_bsyms(std::vector<BoundSymbol>& bsyms, const Device& device, const std::string& name) {
  for (BoundSymbol& b : bsyms) {
    for (Proxy& p : b.outputs) p.type.device = device;
    if (b.attrs.has("device")) b.attrs.set("device", name);
    if (!b.subsymbols.empty()) place_bsyms(b.subsymbols.mut(), device, name);
  }
}

}  // namespace

Trace place(const Trace& trace, const Device& device) {
  Trace out = trace;
  for (Proxy& a : out.args) a.type.device = device;
  place_bsyms(out.bsyms, device, device_name(device));
  return out;
}

}  // namespace fsdpc
