// All differentiable ops, in namespace shardlab::ops. See each header for shapes.
#pragma once

#include "framework/ops/attention.h"
#include "framework/ops/block_attention.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/embedding.h"
#include "framework/ops/linear_cross_entropy.h"
#include "framework/ops/loss.h"
#include "framework/ops/matmul.h"
#include "framework/ops/norm.h"
#include "framework/ops/routing.h"
#include "framework/ops/shape.h"
