/* scaffold: replaced by the checker implementation */
#include "checker.h"
