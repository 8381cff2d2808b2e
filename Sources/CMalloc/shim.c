// Nothing of its own: the target exists to export <malloc.h> to Swift.
#include "CMalloc.h"
