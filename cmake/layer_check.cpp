// The program of the layer checks (CMakeLists.txt): it does nothing; linking it, with one layer's
// archive taken whole, is the check that the layer calls only the layers it may use.
int main() { return 0; }
