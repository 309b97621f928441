// Intel's ISA-L (Debian's libisal-dev): its CRC-32, and its inflate for gzip sitemaps.
#include <isa-l/crc.h>
// And its inflate, for gzip-compressed sitemaps (LinkLists/GzipInflater.swift).
#include <isa-l/igzip_lib.h>
