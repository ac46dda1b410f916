# The build follows the layers (DESIGN.md §5, core/README.md, tests/layers/check_layers.py). Each
# layer folder is one library, declared with vlessbench_layer(TARGET FOLDER), and linked to the
# layers it may use; what a target may include is what it links, nothing else. Includes name their
# folder ("core/net/tls.hpp", "server/daemon.hpp") from the repository root, the one include path,
# so every header is reachable by path. The link graph decides which ones may be used: at the end
# of the configure, every declared layer library and every target passed to
# vlessbench_layer_guard(TARGET) gets a private include folder, searched first, holding one stub per
# header of every layer folder it does not link (directly or through what it links), whose only
# line is an #error naming the rule:
#   core/net/x.cpp:3:10: ... #error core/net may not include core/config/config.hpp: vlessbench_net
#   does not link core/config (core/README.md)
# A forbidden include is a compile error; an allowed one compiles exactly as before (the stubs are
# never opened, so the preprocessed text, and the compiler cache's key, stay the same).
set(VLESSBENCH_LAYER_FOLDERS core/wire core/net core/config core/log core/client core/runtime target server runner)

#   vlessbench_layer(TARGET FOLDER): TARGET is the library of FOLDER (one of the above).
function(vlessbench_layer target folder)
  if(NOT folder IN_LIST VLESSBENCH_LAYER_FOLDERS)
    message(FATAL_ERROR "vlessbench_layer(${target} ${folder}): not a layer folder (${VLESSBENCH_LAYER_FOLDERS})")
  endif()
  set_property(TARGET ${target} PROPERTY VLESSBENCH_LAYER ${folder})
  set_property(GLOBAL APPEND PROPERTY VLESSBENCH_LAYER_GUARDED ${target})
  # Includes name their folder: the repository root is the one include path, for every layer.
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

#   vlessbench_layer_guard(TARGET): a target of no layer (a fuzzer) may include only what it links.
function(vlessbench_layer_guard target)
  set_property(GLOBAL APPEND PROPERTY VLESSBENCH_LAYER_GUARDED ${target})
endfunction()

# The layer folders TARGET compiles against: its own, and those of every library it links (all of
# its own links, then what each of those passes on; $<LINK_ONLY:...> passes no headers).
function(_vlessbench_layers_seen target out)
  get_target_property(todo ${target} LINK_LIBRARIES)
  set(seen ${target})
  set(folders)
  while(todo)
    list(POP_FRONT todo t)
    if(t MATCHES "^\\$<" OR NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(more ${t} INTERFACE_LINK_LIBRARIES)
    if(more)
      list(APPEND todo ${more})
    endif()
  endwhile()
  foreach(t IN LISTS seen)
    get_target_property(folder ${t} VLESSBENCH_LAYER)
    if(folder)
      list(APPEND folders ${folder})
    endif()
  endforeach()
  set(${out} ${folders} PARENT_SCOPE)
endfunction()

function(_vlessbench_layer_guards)
  get_property(targets GLOBAL PROPERTY VLESSBENCH_LAYER_GUARDED)
  set(guards ${PROJECT_BINARY_DIR}/layer_guards)
  file(REMOVE_RECURSE ${guards})
  foreach(folder IN LISTS VLESSBENCH_LAYER_FOLDERS)
    file(GLOB_RECURSE headers_${folder} CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
      ${PROJECT_SOURCE_DIR}/${folder}/*.hpp ${PROJECT_SOURCE_DIR}/${folder}/*.h)
  endforeach()
  foreach(target IN LISTS targets)
    get_target_property(mine ${target} VLESSBENCH_LAYER)
    if(NOT mine)
      set(mine "${target}")
    endif()
    _vlessbench_layers_seen(${target} allowed)
    foreach(folder IN LISTS VLESSBENCH_LAYER_FOLDERS)
      if(folder IN_LIST allowed)
        continue()
      endif()
      foreach(h IN LISTS headers_${folder})
        file(WRITE ${guards}/${target}/${h}
          "#error ${mine} may not include ${h}: ${target} does not link ${folder} (core/README.md, tests/layers/check_layers.py)\n")
      endforeach()
    endforeach()
    target_include_directories(${target} BEFORE PRIVATE ${guards}/${target})
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _vlessbench_layer_guards)
