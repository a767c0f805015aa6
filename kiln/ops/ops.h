// Every op, by family.
#pragma once

#include "kiln/ops/conv.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fast.h"
#include "kiln/ops/fft.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/quantized.h"
#include "kiln/ops/signal.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/softmax.h"
#include "kiln/ops/sort.h"
