// NodePoolAllocator, PooledMap, PooledSet: moved to fraglab/node_pool.hpp (a header of the core
// layer) so that the device layer can pool its trees too; this name is kept for the policies.
#pragma once

#include "fraglab/node_pool.hpp"
