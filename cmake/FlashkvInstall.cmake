# `cmake --install build` / `make install`: the binary, the tokenizer and bench text it
# finds by default (cli/project_files.h looks under <prefix>/share/flashkv), the docs and the
# licences. The systemd unit is an example to copy (packaging/flashkv.service), installed
# with the docs rather than into a unit directory the package manager owns.
install(TARGETS flashkv RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY models/tokenizer DESTINATION ${CMAKE_INSTALL_DATADIR}/flashkv/models)
install(DIRECTORY data/bench DESTINATION ${CMAKE_INSTALL_DATADIR}/flashkv/data)
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES packaging/flashkv.service DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
