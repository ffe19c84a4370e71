#include "floor.h"
#include "store_floor.h"
