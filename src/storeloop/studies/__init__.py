"""The studies storeloop ships: the OnionChopper thesis's chapter 6 and the seed papers reproduced
(:mod:`.reproduce`, ``storeloop reproduce``), the whole-server studies (:mod:`.server`), the CPU
baseline (:mod:`.cpu`) and their figures. They use the library; nothing in the library uses them."""
