// Saving and loading arrays: NumPy's .npy, safetensors and GGUF (.npz, a
// zip of .npy files, is assembled in Python with zipfile). Saving
// evaluates an array and writes it row-major whatever its layout; loading
// reads the data eagerly into host memory and returns evaluated arrays.
//
// Errors: a file that cannot be opened, read or parsed (missing, truncated,
// corrupt, holding a dtype kiln lacks) raises std::runtime_error naming the
// file and the problem, as MLX does; a bad argument (an unsupported dtype to
// save, a bad metadata value) raises std::invalid_argument.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"
#include "kiln/io/stream.h"

namespace kiln {

// --- .npy ------------------------------------------------------------------
/** Writes a in NumPy's .npy format (version 1; bfloat16 as '<V2', as MLX
 *  writes it). ".npy" is appended to file when it does not end in it. */
void save(std::string file, const array& a);
void save(io::Writer& out, const array& a);
/** Reads a .npy file of format version 1, 2 or 3, little- or big-endian, C
 *  or Fortran order. */
array load(const std::string& file, StreamOrDevice s = {});
array load(io::Reader& in, StreamOrDevice s = {});

// --- .safetensors ----------------------------------------------------------
/** Arrays by name and the string metadata of a safetensors file. */
using SafetensorsLoad =
    std::pair<std::map<std::string, array>, std::map<std::string, std::string>>;

/** ".safetensors" is appended to file when it does not end in it. Dtypes:
 *  BOOL, U8-U64, I8-I64, F16, BF16, F32, F64, C64. */
void save_safetensors(std::string file,
                      const std::map<std::string, array>& arrays,
                      const std::map<std::string, std::string>& metadata = {});
void save_safetensors(io::Writer& out,
                      const std::map<std::string, array>& arrays,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsLoad load_safetensors(const std::string& file,
                                 StreamOrDevice s = {});
SafetensorsLoad load_safetensors(io::Reader& in, StreamOrDevice s = {});

// --- .gguf -----------------------------------------------------------------
/** A GGUF metadata value: a string, a list of strings, or an array (0-d for
 *  a scalar, 1-d for a list of numbers or bools). */
using GGUFMetaData = std::variant<std::string, std::vector<std::string>, array>;
using GGUFLoad = std::pair<std::map<std::string, array>,
                           std::map<std::string, GGUFMetaData>>;

/** ".gguf" is appended to file when it does not end in it. Tensor dtypes:
 *  float32, float16, bfloat16, int8, int16, int32, int64, float64 (GGUF has
 *  no unsigned, bool or complex tensors). Metadata arrays: bool, uint8-64,
 *  int8-64, float32, float64; 0-d or 1-d. */
void save_gguf(std::string file, const std::map<std::string, array>& arrays,
               const std::map<std::string, GGUFMetaData>& metadata = {});
void save_gguf(io::Writer& out, const std::map<std::string, array>& arrays,
               const std::map<std::string, GGUFMetaData>& metadata = {});
/** Reads GGUF version 2 or 3 files with unquantized tensors. */
GGUFLoad load_gguf(const std::string& file, StreamOrDevice s = {});
GGUFLoad load_gguf(io::Reader& in, StreamOrDevice s = {});

} // namespace kiln
