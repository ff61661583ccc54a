#include "ir/trace.h"
