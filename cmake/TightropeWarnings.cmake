# Every target of the project is built with the same strict warnings; a warning is a build failure.
# Not -Wnull-dereference: at -O2 g++ 12 reports false positives inside nlohmann/json's headers.
add_compile_options(-Wall -Wextra -Wpedantic -Werror -Wshadow -Wnon-virtual-dtor -Wold-style-cast
                    -Wcast-align -Woverloaded-virtual -Wformat=2)
