// The public C++ API of kiln.
#pragma once

#include "kiln/core/array.h"
#include "kiln/core/device.h"
#include "kiln/core/dtype.h"
#include "kiln/core/print.h"
#include "kiln/distributed/distributed.h"
#include "kiln/io/function_export.h"
#include "kiln/io/io.h"
#include "kiln/ops/ops.h"
#include "kiln/transforms/autograd.h"
#include "kiln/transforms/compile.h"
#include "kiln/transforms/eval.h"
