// Intel's ISA-L (Debian's libisal-dev): only its CRC-32 is used.
#include <isa-l/crc.h>
