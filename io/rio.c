/* scaffold: replaced by the io implementation */
#include "io.h"
