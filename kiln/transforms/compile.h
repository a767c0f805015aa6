// compile: trace a function once per input signature, simplify and fuse the
// traced graph, and replay it on later calls. A pipeline of named stages
// (trace -> simplify -> fuse -> replace), each switchable off to bisect.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/transforms/autograd.h"

namespace kiln {

/** Implicit state a compiled function reads before each call (inputs) or
 *  writes after it (outputs): for example the global random key, a model's
 *  parameters or an optimizer's state. */
struct CapturedState {
  std::function<std::vector<array>()> get;
  std::function<void(const std::vector<array>&)> set;
};

/** The global random key as captured state. */
CapturedState random_state();

struct CompileOptions {
  /** Key traces on dtype and rank instead of shape. */
  bool shapeless = false;
  /** State read before each call, appended to the traced inputs. */
  std::vector<CapturedState> inputs;
  /** State written after each call from extra traced outputs. */
  std::vector<CapturedState> outputs;
};

/** fun compiled: traced on first use for each signature (dtypes and shapes,
 *  or ranks when shapeless), its graph simplified and its elementwise
 *  regions fused. The traces live as long as the returned function.
 *  On the CPU each fused region runs as one C++ kernel built with the
 *  system compiler ($CXX, else g++, c++, clang++) at first use and cached
 *  in $KILN_CACHE_DIR (else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln);
 *  without a compiler the region's ops run one by one. KILN_DEBUG=1 prints
 *  each kernel's name and source path, =4 its source; KILN_COMPILE_CHECK=1
 *  also runs each region unfused and raises when the results differ. */
Fn compile(Fn fun, CompileOptions options = {});
Fn compile(Fn fun, bool shapeless);

/** Turn compilation off (functions run eagerly) or back on. The environment
 *  variable KILN_DISABLE_COMPILE=1 starts with it off. */
void disable_compile();
void enable_compile();
bool compile_enabled();

/** Stages of the pipeline; each can be turned off to bisect a problem. */
enum class CompileStage { simplify, fuse };
void set_compile_stage(CompileStage stage, bool enabled);
bool compile_stage_enabled(CompileStage stage);

/** The graph of the most recent trace of fun for these inputs, as text
 *  (one line per node; fused regions listed with their contents), or as
 *  Graphviz DOT. Traces fun if needed. */
std::string export_compiled_graph(const Fn& compiled,
                                  const std::vector<array>& inputs,
                                  bool dot = false);

/** The lazy graph that computes outputs (down to evaluated arrays and
 *  constants) as Graphviz DOT; arrays in names are labelled with them. */
std::string graph_to_dot(
    const std::vector<array>& outputs,
    const std::vector<std::pair<std::string, array>>& names = {});

/** Lines describing each fused kernel and why neighbouring ops were left out
 *  (KILN_DEBUG=1 prints them as they happen). */
std::vector<std::string> compile_log();
void clear_compile_log();

} // namespace kiln
